//! Connection and behaviour settings.

use std::time::Duration;

use leaseq_core::{Bounds, Result};

/// Settings for a Redis backend, built with chained setters, as
/// `PgOptions` and `SqliteOptions` are. One difference: the server's
/// address is part of the options (`new(url)`, or [`RedisOptions::cluster`]
/// with seed nodes), because a cluster is reached through several, so
/// `connect` takes the options alone.
///
/// ```
/// use leaseq_redis::RedisOptions;
/// use std::time::Duration;
/// let options = RedisOptions::new("redis://127.0.0.1:6379")
///     .prefix("jobs")
///     .response_timeout(Duration::from_secs(2));
/// assert_eq!(options.key_prefix(), "jobs");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct RedisOptions {
    pub(crate) url: String,
    pub(crate) seeds: Vec<String>,
    pub(crate) prefix: String,
    pub(crate) limits: Bounds,
    pub(crate) response_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) reap_batch: u32,
    pub(crate) idle_wait_connections: usize,
    pub(crate) tcp_nodelay: bool,
    pub(crate) tcp_keepalive: Option<Duration>,
    /// `Some(false)`: report the backend not durable whatever the server
    /// says (see [`RedisOptions::durable`]).
    pub(crate) durable: Option<bool>,
    pub(crate) allow_eviction: bool,
    /// How often the reaper re-reads `maxmemory-policy`
    /// (see [`RedisOptions::policy_check_interval`]).
    pub(crate) policy_check: Duration,
    /// Replicas each write waits for (see [`RedisOptions::wait_for_replicas`]).
    pub(crate) replica_wait: Option<ReplicaWait>,
    pub(crate) test_hooks: bool,
    /// The CA certificates (PEM) trusted for TLS instead of the system's.
    pub(crate) tls_root_cert: Option<RootCert>,
}

/// How many replicas each write waits for, and how long
/// ([`RedisOptions::wait_for_replicas`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaWait {
    replicas: u32,
    timeout: Duration,
}

impl ReplicaWait {
    /// The replicas each write waits for.
    pub fn replicas(&self) -> u32 {
        self.replicas
    }

    /// How long a write waits for them.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The timeout in whole ms for `WAIT` (at least 1: `WAIT n 0` would
    /// wait for ever).
    pub(crate) fn timeout_ms(&self) -> u64 {
        u64::try_from(self.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// The wait must end before the reply is given up on, or every wait
    /// that runs out would be reported as a timed-out call.
    fn check(&self, response_timeout: Duration) -> Result<()> {
        if self.replicas == 0 {
            return Err(leaseq_core::Error::invalid(
                "wait_for_replicas: replicas must be at least 1",
            ));
        }
        if self.timeout < Duration::from_millis(1) || self.timeout >= response_timeout {
            return Err(leaseq_core::Error::invalid(format!(
                "wait_for_replicas: the timeout ({:?}) must be at least 1 ms and below the \
                 response timeout ({response_timeout:?})",
                self.timeout
            )));
        }
        Ok(())
    }
}

/// PEM bytes of trusted CA certificates (shown by size, not content).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct RootCert(pub(crate) Vec<u8>);

impl std::fmt::Debug for RootCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RootCert({} bytes of PEM)", self.0.len())
    }
}

/// The URL and seeds shown with their passwords masked.
impl std::fmt::Debug for RedisOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisOptions")
            .field("url", &self.shown_url())
            .field("seeds", &self.shown_seeds())
            .field("prefix", &self.prefix)
            .field("limits", &self.limits)
            .field("response_timeout", &self.response_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("reap_batch", &self.reap_batch)
            .field("idle_wait_connections", &self.idle_wait_connections)
            .field("tcp_nodelay", &self.tcp_nodelay)
            .field("tcp_keepalive", &self.tcp_keepalive)
            .field("durable", &self.durable)
            .field("allow_eviction", &self.allow_eviction)
            .field("policy_check", &self.policy_check)
            .field("replica_wait", &self.replica_wait)
            .field("test_hooks", &self.test_hooks)
            .field("tls_root_cert", &self.tls_root_cert)
            .finish()
    }
}

impl RedisOptions {
    /// The default key prefix.
    pub const DEFAULT_PREFIX: &'static str = "leaseq";

    /// How often, by default, the reaper re-reads `maxmemory-policy`
    /// ([`RedisOptions::policy_check_interval`]).
    pub const DEFAULT_POLICY_CHECK: Duration = Duration::from_secs(10);

    /// Settings for the server at `url` (`redis://[user:pass@]host:port[/db]`),
    /// or for a Redis Cluster given as
    /// `redis+cluster://[user:pass@]host:port[,host:port...]`: each
    /// `host:port` is a seed node (one reachable seed is enough; the client
    /// discovers the rest and follows the cluster's slot map).
    ///
    /// `rediss://…` and `rediss+cluster://…` connect over TLS (feature
    /// `tls`, on by default), checking the server's certificate and host
    /// name against the system's trusted roots, or against
    /// [`RedisOptions::tls_root_cert`]. Such a URL is never dialled in
    /// plaintext: without the `tls` feature `connect` refuses it with
    /// [`leaseq_core::Error::InvalidInput`], and a server that does not speak
    /// TLS fails the handshake.
    ///
    /// ```
    /// use leaseq_redis::RedisOptions;
    /// let c = RedisOptions::new("redis+cluster://app:pw@10.0.0.1:7000,10.0.0.2:7000");
    /// assert!(c.is_cluster());
    /// assert_eq!(
    ///     c.seeds(),
    ///     ["redis://app:pw@10.0.0.1:7000", "redis://app:pw@10.0.0.2:7000"]
    /// );
    /// let tls = RedisOptions::new("rediss+cluster://10.0.0.1:7000");
    /// assert!(tls.uses_tls());
    /// assert_eq!(tls.seeds(), ["rediss://10.0.0.1:7000"]);
    /// ```
    pub fn new(url: impl Into<String>) -> Self {
        let url = url.into();
        let seeds = crate::cluster_url::seeds_of(&url);
        RedisOptions {
            url,
            seeds,
            prefix: Self::DEFAULT_PREFIX.into(),
            limits: Bounds::default(),
            response_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            reap_batch: 500,
            idle_wait_connections: 4,
            tcp_nodelay: true,
            tcp_keepalive: None,
            durable: None,
            allow_eviction: false,
            policy_check: Self::DEFAULT_POLICY_CHECK,
            replica_wait: None,
            test_hooks: false,
            tls_root_cert: None,
        }
    }

    /// Settings for a Redis Cluster reached through `seeds`, each a
    /// `redis://[user:pass@]host:port` URL of one node (a list of any of the
    /// cluster's nodes; one reachable seed is enough). Seeds given as
    /// `rediss://` connect over TLS; all seeds must then be `rediss://`.
    ///
    /// ```
    /// use leaseq_redis::RedisOptions;
    /// let c = RedisOptions::cluster(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]);
    /// assert!(c.is_cluster());
    /// assert_eq!(c.url(), "redis+cluster://127.0.0.1:7000,127.0.0.1:7001");
    /// ```
    pub fn cluster<S: Into<String>>(seeds: impl IntoIterator<Item = S>) -> Self {
        let seeds: Vec<String> = seeds.into_iter().map(Into::into).collect();
        let mut config = RedisOptions::new(crate::cluster_url::url_of(&seeds));
        config.seeds = seeds;
        config
    }

    /// True when the settings name a Redis Cluster rather than one server.
    pub fn is_cluster(&self) -> bool {
        !self.seeds.is_empty()
    }

    /// The cluster's seed node URLs (empty for a single server).
    pub fn seeds(&self) -> &[String] {
        &self.seeds
    }

    /// True when the URL asks for TLS (`rediss://`, `rediss+cluster://`).
    pub fn uses_tls(&self) -> bool {
        crate::cluster_url::wants_tls(&self.url)
            || self.seeds.iter().any(|s| crate::cluster_url::wants_tls(s))
    }

    /// Trusts the CA certificates in `pem` (one or more PEM `CERTIFICATE`
    /// blocks, e.g. the contents of a private CA's `ca.pem`) for TLS
    /// connections, instead of the system's trusted roots. The server's
    /// certificate must still chain to one of them and name the host in
    /// the URL (a DNS name or an IP address).
    ///
    /// Both clients honour it. It needs a TLS URL (`rediss://`,
    /// `rediss+cluster://`): with a `redis://` URL `connect` fails with
    /// [`leaseq_core::Error::InvalidInput`] rather than connect in
    /// plaintext. PEM that holds no certificate fails the same way.
    ///
    /// ```
    /// use leaseq_redis::RedisOptions;
    /// # let ca_pem = b"-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n".to_vec();
    /// // let ca_pem = std::fs::read("/etc/redis/tls/ca.pem")?;
    /// let config = RedisOptions::new("rediss://redis.internal:6380").tls_root_cert(ca_pem);
    /// assert!(config.uses_tls());
    /// assert!(config.root_cert_pem().is_some());
    /// ```
    #[must_use]
    pub fn tls_root_cert(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_root_cert = Some(RootCert(pem.into()));
        self
    }

    /// The CA certificates (PEM) set by [`RedisOptions::tls_root_cert`].
    pub fn root_cert_pem(&self) -> Option<&[u8]> {
        self.tls_root_cert.as_ref().map(|c| c.0.as_slice())
    }

    /// The prefix of every key (1 to 64 ASCII letters, digits, `-_.:`).
    /// Two backends with different prefixes never see each other's queues.
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The limits enforced on enqueue.
    #[must_use]
    pub fn limits(mut self, limits: Bounds) -> Self {
        self.limits = limits;
        self
    }

    /// How long to wait for a reply before the call fails with
    /// [`leaseq_core::Error::OutcomeUnknown`].
    #[must_use]
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// How long one connection attempt may take.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Expired leases recovered per script call during a reap (1 to 10,000);
    /// a reap runs as many calls as it needs.
    #[must_use]
    pub fn reap_batch(mut self, batch: u32) -> Self {
        self.reap_batch = batch;
        self
    }

    /// Idle dedicated connections kept for workers waiting for work.
    #[must_use]
    pub fn idle_wait_connections(mut self, n: usize) -> Self {
        self.idle_wait_connections = n;
        self
    }

    /// Sets `TCP_NODELAY` on every connection to the server (on by
    /// default): a script call is one small write, sent at once instead of
    /// waiting for the acknowledgement of the previous segment (Nagle's
    /// algorithm). Both clients (`redis` and `fred`) apply it the same way,
    /// on plain and TLS connections, single server and cluster.
    #[must_use]
    pub fn tcp_nodelay(mut self, on: bool) -> Self {
        self.tcp_nodelay = on;
        self
    }

    /// Whether connections set `TCP_NODELAY` ([`RedisOptions::tcp_nodelay`]).
    pub fn sets_tcp_nodelay(&self) -> bool {
        self.tcp_nodelay
    }

    /// TCP keep-alive on every connection to the server: `Some(idle)`
    /// turns on `SO_KEEPALIVE` with the first probe after `idle` without
    /// traffic (the system's probe interval and count apply after it);
    /// `None`, the default, leaves keep-alive off. A worker waiting for
    /// work on a quiet queue holds a connection that may carry nothing for
    /// long: probes keep a NAT or firewall from dropping it silently and
    /// find a peer that vanished. Both clients apply it the same way, on
    /// plain and TLS connections, single server and cluster. Platforms
    /// count it in whole seconds.
    ///
    /// ```
    /// use leaseq_redis::RedisOptions;
    /// use std::time::Duration;
    /// let c = RedisOptions::new("redis://127.0.0.1:6379")
    ///     .tcp_keepalive(Some(Duration::from_secs(60)));
    /// assert_eq!(c.keepalive_after(), Some(Duration::from_secs(60)));
    /// ```
    #[must_use]
    pub fn tcp_keepalive(mut self, idle: Option<Duration>) -> Self {
        self.tcp_keepalive = idle;
        self
    }

    /// The idle time before the first keep-alive probe
    /// ([`RedisOptions::tcp_keepalive`]); `None` when keep-alive is off.
    pub fn keepalive_after(&self) -> Option<Duration> {
        self.tcp_keepalive
    }

    /// Turns on [`leaseq_core::testing::TestHooks`] for test suites (off by default:
    /// hooks expire live leases and plant corrupt entries).
    #[must_use]
    pub fn test_hooks(mut self, on: bool) -> Self {
        self.test_hooks = on;
        self
    }

    /// An override of the durability the backend reports; prefer leaving
    /// it unset.
    ///
    /// [`leaseq_core::Capabilities::durable`] comes from the server: at
    /// connect the backend reads `appendonly`, `appendfsync` and the
    /// connected replicas (on every master of a cluster) and reports
    /// durable only when each has `appendonly yes` and `appendfsync
    /// always`, and either no replica or writes that wait for all of them
    /// ([`RedisOptions::wait_for_replicas`]): a forced failover otherwise
    /// loses acknowledged writes (see the crate docs, "Persistence and
    /// what is lost" and "Replicas and failover"). `durable(false)` turns that off (the
    /// backend then reports not durable whatever the server says);
    /// `durable(true)` is accepted for compatibility with the time this
    /// setting was a declaration, but cannot make a server durable: the
    /// server's settings still decide, and a mismatch is logged.
    #[must_use]
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = Some(durable);
        self
    }

    /// Makes every write wait for `replicas` replicas: right after each
    /// script that writes, the client sends `WAIT replicas timeout` on the
    /// same connection, pipelined in the same round trip (on a cluster, to
    /// the node that ran the script). A write reports `Ok` only once that
    /// many replicas acknowledged it; when the wait times out or reaches
    /// fewer, the call fails with [`leaseq_core::Error::OutcomeUnknown`]: it was
    /// applied on the master but may be lost by a failover, so the caller
    /// settles it by its identity ([`leaseq_core::settle`]) as it would a
    /// lost reply. Reads (`stats`, `peek`, `item`, the listing, the clock)
    /// do not wait. `timeout` is at least 1 ms and below the response
    /// timeout, `replicas` at least 1.
    ///
    /// Each write then costs a round trip to the replicas, and the
    /// connection (shared by the handle's calls) waits with it. What a
    /// forced failover loses with and without it is in the crate docs
    /// ("Replicas and failover").
    ///
    /// ```
    /// use leaseq_redis::RedisOptions;
    /// use std::time::Duration;
    /// let c = RedisOptions::new("redis://127.0.0.1:6379")
    ///     .wait_for_replicas(1, Duration::from_millis(500));
    /// let wait = c.replica_wait().expect("set");
    /// assert_eq!((wait.replicas(), wait.timeout()), (1, Duration::from_millis(500)));
    /// ```
    #[must_use]
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replica_wait = Some(ReplicaWait { replicas, timeout });
        self
    }

    /// What [`RedisOptions::wait_for_replicas`] set, if anything.
    pub fn replica_wait(&self) -> Option<ReplicaWait> {
        self.replica_wait
    }

    /// Lets [`connect`](crate::RedisRsBackend::connect) accept a server
    /// whose `maxmemory-policy` evicts keys (anything but `noeviction`), which
    /// it otherwise refuses with [`leaseq_core::Error::InvalidInput`], and
    /// keeps writes going when the reaper's re-check finds such a policy
    /// later (see [`RedisOptions::policy_check_interval`]).
    ///
    /// An evicting server deletes keys when it is full: an item, an index,
    /// the id counter or an `enqueue_once` request's record may vanish, so
    /// items are lost, or delivered again, silently. With this set the
    /// backend connects anyway and logs a warning at connect, and again
    /// when a re-check finds the policy changed. Off by default.
    #[must_use]
    pub fn allow_eviction(mut self, allow: bool) -> Self {
        self.allow_eviction = allow;
        self
    }

    /// How often the server's `maxmemory-policy` is read again while the
    /// backend runs (10 s by default; zero: at every reap). The reaper
    /// ([`leaseq_core::Backend::reap`]) reads it when the last read is at
    /// least this old, on the one server or every cluster master; other
    /// calls never wait for it. When a node runs an evicting policy and
    /// [`RedisOptions::allow_eviction`] is off, the backend logs an error
    /// and refuses the writes that add items (enqueue, `enqueue_once`, a
    /// schedule's fire) with [`leaseq_core::Error::Unavailable`] until a
    /// read finds `noeviction` again; leases keep working, so consumers
    /// drain the backlog. See the crate docs, "Checks at connect".
    ///
    /// ```
    /// use leaseq_redis::RedisOptions;
    /// use std::time::Duration;
    /// let c = RedisOptions::new("redis://127.0.0.1:6379")
    ///     .policy_check_interval(Duration::from_secs(30));
    /// assert_eq!(c.policy_check_every(), Duration::from_secs(30));
    /// ```
    #[must_use]
    pub fn policy_check_interval(mut self, every: Duration) -> Self {
        self.policy_check = every;
        self
    }

    /// How often `maxmemory-policy` is read again
    /// ([`RedisOptions::policy_check_interval`]).
    pub fn policy_check_every(&self) -> Duration {
        self.policy_check
    }

    /// Whether an evicting `maxmemory-policy` is accepted
    /// ([`RedisOptions::allow_eviction`]).
    pub fn allows_eviction(&self) -> bool {
        self.allow_eviction
    }

    /// The server URL, password included: print [`RedisOptions::shown_url`]
    /// instead.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server URL with its password masked
    /// ([`leaseq_core::redact_url`]): the form for errors and logs.
    pub fn shown_url(&self) -> String {
        leaseq_core::redact_url(&self.url)
    }

    /// The cluster's seed URLs, passwords masked.
    fn shown_seeds(&self) -> Vec<String> {
        self.seeds
            .iter()
            .map(|s| leaseq_core::redact_url(s))
            .collect()
    }

    /// The key prefix.
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// What a failed first connection was doing, for its error: with TLS
    /// said so, since a server that does not speak TLS on the port shows
    /// up as a handshake that times out or breaks.
    #[cfg_attr(not(any(feature = "fred", feature = "redis-rs")), allow(dead_code))]
    pub(crate) fn connecting(&self) -> String {
        if self.uses_tls() {
            format!(
                "connecting to {} over TLS (does the server speak TLS on that port?)",
                self.shown_url()
            )
        } else {
            format!("connecting to {}", self.shown_url())
        }
    }

    /// The error for a first connection that failed: a login the server
    /// refused (`auth`) is [`leaseq_core::Error::Rejected`] and says how
    /// to fix it; anything else is `Unavailable`.
    #[cfg_attr(not(any(feature = "fred", feature = "redis-rs")), allow(dead_code))]
    pub(crate) fn connect_failed(
        &self,
        auth: bool,
        e: impl Into<leaseq_core::BoxError>,
    ) -> leaseq_core::Error {
        if auth {
            leaseq_core::Error::rejected(
                format!(
                    "{}: authentication failed: check the user and password in the URL",
                    self.connecting()
                ),
                e,
            )
        } else {
            leaseq_core::Error::unavailable(self.connecting(), e)
        }
    }

    pub(crate) fn check(&self) -> Result<()> {
        crate::keys::check_prefix(&self.prefix)?;
        self.check_tls()?;
        if crate::cluster_url::is_cluster_url(&self.url) && self.seeds.is_empty() {
            return Err(leaseq_core::Error::invalid(format!(
                "cluster url {:?} names no seed host:port",
                self.shown_url()
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
        if let Some(w) = self.replica_wait {
            w.check(self.response_timeout)?;
        }
        Ok(())
    }

    /// A TLS URL needs TLS support, a root certificate needs a TLS URL, and
    /// a cluster's seeds all use TLS or none does: whatever asks for TLS
    /// is refused here rather than dialled in plaintext.
    fn check_tls(&self) -> Result<()> {
        use crate::cluster_url::wants_tls;
        let tls = self.uses_tls();
        let with_tls = self.seeds.iter().filter(|s| wants_tls(s)).count();
        if with_tls != 0 && with_tls != self.seeds.len() {
            return Err(leaseq_core::Error::invalid(format!(
                "cluster seeds {:?} mix TLS (rediss://) and plaintext (redis://) nodes",
                self.shown_seeds()
            )));
        }
        if tls && !cfg!(feature = "tls") {
            return Err(leaseq_core::Error::invalid(format!(
                "redis url {:?} asks for TLS, but leaseq-redis was built without TLS \
                 support; enable the `tls` feature (of `leaseq` or `leaseq-redis`)",
                self.shown_url()
            )));
        }
        if self.tls_root_cert.is_some() && !tls {
            return Err(leaseq_core::Error::invalid(format!(
                "a TLS root certificate is set but redis url {:?} does not ask for TLS; \
                 use rediss:// (or rediss+cluster://)",
                self.shown_url()
            )));
        }
        #[cfg(feature = "tls")]
        if tls {
            self.tls_roots()?;
        }
        Ok(())
    }

    /// The trusted roots of [`RedisOptions::tls_root_cert`], or `None` for
    /// the system's.
    #[cfg(feature = "tls")]
    pub(crate) fn tls_roots(&self) -> Result<Option<rustls::RootCertStore>> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::CertificateDer;
        let Some(RootCert(pem)) = &self.tls_root_cert else {
            return Ok(None);
        };
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| {
                leaseq_core::Error::invalid(format!("TLS root certificate: bad PEM: {e}"))
            })?;
            roots
                .add(cert)
                .map_err(|e| leaseq_core::Error::invalid(format!("TLS root certificate: {e}")))?;
        }
        if roots.is_empty() {
            return Err(leaseq_core::Error::invalid(
                "TLS root certificate: the PEM holds no CERTIFICATE block",
            ));
        }
        Ok(Some(roots))
    }
}

/// Makes rustls's `ring` provider the process-wide default unless the
/// program installed one. The clients build their TLS settings from that
/// default; with only `ring` compiled in rustls would pick it anyway, and
/// with several providers compiled in (none installed) it would panic.
#[cfg(feature = "tls")]
#[cfg_attr(not(any(feature = "fred", feature = "redis-rs")), allow(dead_code))]
pub(crate) fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may have installed one meanwhile: either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(config: &RedisOptions) -> String {
        match config.check() {
            Err(leaseq_core::Error::InvalidInput { what }) => what,
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    #[test]
    fn socket_settings_default_to_nodelay_without_keepalive() {
        let c = RedisOptions::new("redis://h:1");
        assert!(c.sets_tcp_nodelay());
        assert_eq!(c.keepalive_after(), None);
        let c = c
            .tcp_nodelay(false)
            .tcp_keepalive(Some(Duration::from_secs(45)));
        assert!(!c.sets_tcp_nodelay());
        assert_eq!(c.keepalive_after(), Some(Duration::from_secs(45)));
        assert_eq!(c.tcp_keepalive(None).keepalive_after(), None);
    }

    #[test]
    fn tls_is_read_from_the_url_and_the_seeds() {
        assert!(!RedisOptions::new("redis://h:1").uses_tls());
        assert!(RedisOptions::new("rediss://h:1").uses_tls());
        assert!(RedisOptions::new("rediss+cluster://h:1,h:2").uses_tls());
        let c = RedisOptions::cluster(["rediss://h:1", "rediss://h:2"]);
        assert!(c.uses_tls());
        assert_eq!(c.url(), "rediss+cluster://h:1,h:2");
    }

    #[test]
    fn a_replica_wait_needs_a_replica_and_a_timeout_below_the_response_timeout() {
        let base = RedisOptions::new("redis://h:1").response_timeout(Duration::from_secs(2));
        let zero = base
            .clone()
            .wait_for_replicas(0, Duration::from_millis(100));
        assert!(refused(&zero).contains("at least 1"));
        let long = base.clone().wait_for_replicas(1, Duration::from_secs(2));
        assert!(refused(&long).contains("below the response timeout"));
        let none = base.clone().wait_for_replicas(1, Duration::ZERO);
        assert!(refused(&none).contains("at least 1 ms"));
        let ok = base.wait_for_replicas(2, Duration::from_millis(300));
        assert!(ok.check().is_ok());
        let w = ok.replica_wait().expect("set");
        assert_eq!((w.replicas(), w.timeout_ms()), (2, 300));
    }

    #[test]
    fn mixed_seeds_are_refused() {
        let c = RedisOptions::cluster(["rediss://h:1", "redis://h:2"]);
        assert!(refused(&c).contains("mix TLS"));
    }

    #[test]
    fn the_password_is_masked_in_debug_and_errors() {
        let c = RedisOptions::new("redis://app:planted-pw@h:1");
        let shown = format!("{c:?}");
        assert!(shown.contains("redis://app:***@h:1"), "{shown}");
        assert!(!shown.contains("planted-pw"), "{shown}");
        assert!(!c.connecting().contains("planted-pw"));
        let c = RedisOptions::new("redis+cluster://u:planted-pw@a:1,b:2");
        assert!(!format!("{c:?}").contains("planted-pw"), "{c:?}");
        let e = refused(&RedisOptions::new("redis+cluster://u:planted-pw@"));
        assert!(e.contains("no seed") && !e.contains("planted-pw"), "{e}");
        let e =
            refused(&RedisOptions::new("redis://u:planted-pw@h:1").tls_root_cert(b"x".to_vec()));
        assert!(
            e.contains("does not ask for TLS") && !e.contains("planted-pw"),
            "{e}"
        );
    }

    #[test]
    fn a_root_certificate_needs_a_tls_url() {
        let c = RedisOptions::new("redis://h:1").tls_root_cert(b"x".to_vec());
        assert!(refused(&c).contains("does not ask for TLS"));
    }

    #[test]
    fn an_empty_cluster_url_is_refused_for_either_scheme() {
        assert!(refused(&RedisOptions::new("redis+cluster://")).contains("no seed"));
        #[cfg(feature = "tls")]
        assert!(refused(&RedisOptions::new("rediss+cluster://")).contains("no seed"));
    }

    #[cfg(feature = "tls")]
    #[test]
    fn a_root_certificate_must_hold_a_certificate() {
        let c = RedisOptions::new("rediss://h:1").tls_root_cert(b"not pem".to_vec());
        assert!(refused(&c).contains("no CERTIFICATE"));
        assert!(RedisOptions::new("rediss://h:1").check().is_ok());
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn without_tls_a_tls_url_names_the_feature() {
        let what = refused(&RedisOptions::new("rediss://h:1"));
        assert!(what.contains("`tls` feature"), "{what}");
    }
}
