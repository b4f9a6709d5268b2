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
    pub(crate) seeds: Vec<String>,
    pub(crate) prefix: String,
    pub(crate) limits: Limits,
    pub(crate) response_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) reap_batch: u32,
    pub(crate) idle_wait_connections: usize,
    /// `Some(false)`: report the backend not durable whatever the server
    /// says (see [`RedisConfig::durable`]).
    pub(crate) durable: Option<bool>,
    pub(crate) allow_eviction: bool,
    pub(crate) test_hooks: bool,
}

impl RedisConfig {
    /// The default key prefix.
    pub const DEFAULT_PREFIX: &'static str = "leaseq";

    /// Settings for the server at `url` (`redis://[user:pass@]host:port[/db]`),
    /// or for a Redis Cluster given as
    /// `redis+cluster://[user:pass@]host:port[,host:port...]`: each
    /// `host:port` is a seed node (one reachable seed is enough; the client
    /// discovers the rest and follows the cluster's slot map).
    ///
    /// ```
    /// use leaseq_redis::RedisConfig;
    /// let c = RedisConfig::new("redis+cluster://app:pw@10.0.0.1:7000,10.0.0.2:7000");
    /// assert!(c.is_cluster());
    /// assert_eq!(
    ///     c.get_seeds(),
    ///     ["redis://app:pw@10.0.0.1:7000", "redis://app:pw@10.0.0.2:7000"]
    /// );
    /// ```
    pub fn new(url: impl Into<String>) -> Self {
        let url = url.into();
        let seeds = crate::cluster_url::seeds_of(&url);
        RedisConfig {
            url,
            seeds,
            prefix: Self::DEFAULT_PREFIX.into(),
            limits: Limits::default(),
            response_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            reap_batch: 500,
            idle_wait_connections: 4,
            durable: None,
            allow_eviction: false,
            test_hooks: false,
        }
    }

    /// Settings for a Redis Cluster reached through `seeds`, each a
    /// `redis://[user:pass@]host:port` URL of one node (a list of any of the
    /// cluster's nodes; one reachable seed is enough).
    ///
    /// ```
    /// use leaseq_redis::RedisConfig;
    /// let c = RedisConfig::cluster(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]);
    /// assert!(c.is_cluster());
    /// assert_eq!(c.get_url(), "redis+cluster://127.0.0.1:7000,127.0.0.1:7001");
    /// ```
    pub fn cluster<S: Into<String>>(seeds: impl IntoIterator<Item = S>) -> Self {
        let seeds: Vec<String> = seeds.into_iter().map(Into::into).collect();
        let mut config = RedisConfig::new(crate::cluster_url::url_of(&seeds));
        config.seeds = seeds;
        config
    }

    /// True when the settings name a Redis Cluster rather than one server.
    pub fn is_cluster(&self) -> bool {
        !self.seeds.is_empty()
    }

    /// The cluster's seed node URLs (empty for a single server).
    pub fn get_seeds(&self) -> &[String] {
        &self.seeds
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

    /// Turns on [`leaseq_core::TestHooks`] for test suites (off by default:
    /// hooks expire live leases and plant corrupt entries).
    pub fn test_hooks(mut self, on: bool) -> Self {
        self.test_hooks = on;
        self
    }

    /// An override of the durability the backend reports; prefer leaving
    /// it unset.
    ///
    /// [`leaseq_core::Capabilities::durable`] comes from the server: at
    /// connect the backend reads `appendonly` and `appendfsync` (on every
    /// master of a cluster) and reports durable only when each has
    /// `appendonly yes` and `appendfsync always` (see the crate docs,
    /// "Persistence and what is lost"). `durable(false)` turns that off (the
    /// backend then reports not durable whatever the server says);
    /// `durable(true)` is accepted for compatibility with the time this
    /// setting was a declaration, but cannot make a server durable: the
    /// server's settings still decide, and a mismatch is logged.
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = Some(durable);
        self
    }

    /// Lets [`connect`](crate::RedisRsBackend::connect) accept a server
    /// whose `maxmemory-policy` evicts keys (anything but `noeviction`), which
    /// it otherwise refuses with [`leaseq_core::Error::InvalidInput`].
    ///
    /// An evicting server deletes keys when it is full: an item, an index,
    /// the id counter or an `enqueue_once` request's record may vanish, so
    /// items are lost, or delivered again, silently. With this set the
    /// backend connects anyway and logs a warning at connect. Off by
    /// default.
    pub fn allow_eviction(mut self, allow: bool) -> Self {
        self.allow_eviction = allow;
        self
    }

    /// Whether an evicting `maxmemory-policy` is accepted
    /// ([`RedisConfig::allow_eviction`]).
    pub fn get_allow_eviction(&self) -> bool {
        self.allow_eviction
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
        if self.url.starts_with(crate::cluster_url::SCHEME) && self.seeds.is_empty() {
            return Err(leaseq_core::Error::invalid(format!(
                "cluster url {:?} names no seed host:port",
                self.url
            )));
        }
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
