//! Connection and behaviour settings.

use std::time::Duration;

use leaseq_core::{Limits, Result};

/// Settings for a Redis backend, built with chained setters.
///
/// ```
/// use leaseq_redis::RedisConfig;
/// use std::time::Duration;
/// let config = RedisConfig::new("redis://127.0.0.1:6379")
///     .prefix("jobs")
///     .response_timeout(Duration::from_secs(2));
/// assert_eq!(config.get_prefix(), "jobs");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisConfig {
    pub(crate) url: String,
    pub(crate) prefix: String,
    pub(crate) limits: Limits,
    pub(crate) response_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) reap_batch: u32,
    pub(crate) idle_wait_connections: usize,
    pub(crate) durable: bool,
}

impl RedisConfig {
    /// The default key prefix.
    pub const DEFAULT_PREFIX: &'static str = "leaseq";

    /// Settings for the server at `url` (`redis://[user:pass@]host:port[/db]`).
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            prefix: Self::DEFAULT_PREFIX.into(),
            limits: Limits::default(),
            response_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            reap_batch: 500,
            idle_wait_connections: 4,
            durable: false,
        }
    }

    /// The prefix of every key (1 to 64 ASCII letters, digits, `-_.:`).
    /// Two backends with different prefixes never see each other's queues.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The limits enforced on enqueue.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// How long to wait for a reply before the call fails with
    /// [`leaseq_core::Error::Backend`].
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// How long one connection attempt may take.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Expired leases recovered per script call during a reap (1 to 10,000);
    /// a reap runs as many calls as it needs.
    pub fn reap_batch(mut self, batch: u32) -> Self {
        self.reap_batch = batch;
        self
    }

    /// Idle dedicated connections kept for workers waiting for work.
    pub fn idle_wait_connections(mut self, n: usize) -> Self {
        self.idle_wait_connections = n;
        self
    }

    /// Declares the server durable across a crash (append-only file with
    /// `appendfsync always`); reported in the capabilities. The backend
    /// cannot check this itself.
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    /// The server URL.
    pub fn get_url(&self) -> &str {
        &self.url
    }

    /// The key prefix.
    pub fn get_prefix(&self) -> &str {
        &self.prefix
    }

    pub(crate) fn check(&self) -> Result<()> {
        crate::keys::check_prefix(&self.prefix)?;
        if !(1..=10_000).contains(&self.reap_batch) {
            return Err(leaseq_core::Error::invalid(
                "reap batch must be 1 to 10,000",
            ));
        }
        if self.response_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(leaseq_core::Error::invalid("timeouts must be above zero"));
        }
        Ok(())
    }
}
