//! Shared test support: the server URL, skip-or-fail when it is missing,
//! backends of either client on a private key prefix, and cleanup.
#![allow(dead_code, unreachable_pub)]

pub mod cluster;
/// The private `redis-server` of tests that kill or restart a server.
pub mod server {
    #[allow(unused_imports)]
    pub use leaseq_testkit::redis_server::PrivateRedis as PrivateServer;
}

use std::sync::Arc;

use leaseq_core::Backend;
use leaseq_redis::RedisOptions;
pub use leaseq_testkit::redis_prefix::{delete_prefix, PrefixGuard as Cleanup};

/// The server under test.
pub fn url() -> String {
    leaseq_testkit::env::redis_url()
}

/// Outside CI: prints the skip line. In CI: panics.
pub fn unavailable(url: &str, err: impl std::fmt::Display) {
    leaseq_testkit::env::skip(&format!("no Redis at {url}"), err);
}

/// A fresh key prefix for one test.
pub fn fresh_prefix(tag: &str) -> String {
    format!("t-{tag}-{}", leaseq_testkit::env::tag())
}

/// Which client a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    RedisRs,
    Fred,
}

impl Which {
    pub fn name(self) -> &'static str {
        match self {
            Which::RedisRs => "redis-rs",
            Which::Fred => "fred",
        }
    }

    /// The other client when it is built, else the same one (on a handle
    /// of its own all the same): a second handle that talks to the store
    /// as another process would.
    pub fn other(self) -> Which {
        match self {
            #[cfg(feature = "fred")]
            Which::RedisRs => Which::Fred,
            #[cfg(feature = "redis-rs")]
            Which::Fred => Which::RedisRs,
            #[allow(unreachable_patterns)]
            same => same,
        }
    }
}

/// A backend of `which` for `config`.
pub async fn connect(which: Which, config: RedisOptions) -> leaseq_core::Result<Arc<dyn Backend>> {
    match which {
        #[cfg(feature = "redis-rs")]
        Which::RedisRs => Ok(Arc::new(
            leaseq_redis::RedisRsBackend::connect(config).await?,
        )),
        #[cfg(feature = "fred")]
        Which::Fred => Ok(Arc::new(leaseq_redis::FredBackend::connect(config).await?)),
        #[allow(unreachable_patterns)]
        _ => Err(leaseq_core::Error::invalid(format!(
            "client {} not built",
            which.name()
        ))),
    }
}

/// A backend on the shared server under a fresh prefix, with its cleanup;
/// `None` (after the skip line) when the server is unreachable.
pub async fn backend(which: Which, tag: &str) -> Option<(Arc<dyn Backend>, Cleanup)> {
    let url = url();
    let prefix = fresh_prefix(tag);
    let config = RedisOptions::new(&url).prefix(&prefix).test_hooks(true);
    match connect(which, config).await {
        Ok(b) => Some((b, Cleanup { url, prefix })),
        Err(e) => {
            unavailable(&url, e);
            None
        }
    }
}

/// Claims one item of `q` a few milliseconds on, acks it, and asserts that
/// `lease_fate` asked past its expiry tells Finished: no reap took it,
/// whatever takeover traces (and their floor) the queue holds.
pub async fn assert_a_fresh_ack_is_finished(b: &dyn Backend, q: &leaseq_core::QueueName) {
    use leaseq_core::{ClaimSpec, LeaseFate};
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let spec = ClaimSpec::new(1, std::time::Duration::from_secs(60)).expect("spec");
    let mut ls = b.claim(q, spec).await.expect("claim").leases;
    let l = ls.pop().expect("a lease");
    b.ack(&l.key).await.expect("ack");
    let past = b.now().await.expect("now");
    let fate = b.lease_fate(&l.key, past).await.expect("fate");
    assert_eq!(fate, LeaseFate::Finished { state: None });
}

/// A raw connection for planting corruption. No response timeout: the
/// client's default (500 ms) fails a large read on a loaded machine, and
/// each check has its own deadline.
pub async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("raw connection")
}

/// A conformance factory: backends of one client on the shared server, one
/// per check, under a prefix of the factory's own that it deletes when
/// dropped.
#[derive(Debug)]
pub struct Factory {
    which: Which,
    shards: Option<u16>,
    cleanup: Cleanup,
    backend: tokio::sync::OnceCell<Result<Arc<dyn Backend>, String>>,
}

impl Factory {
    pub fn new(which: Which) -> Self {
        Factory {
            which,
            shards: None,
            cleanup: Cleanup {
                url: url(),
                prefix: fresh_prefix(which.name()),
            },
            backend: tokio::sync::OnceCell::new(),
        }
    }

    /// Each logical queue sharded over `k` physical queues.
    pub fn sharded(which: Which, k: u16) -> Self {
        Factory {
            shards: Some(k),
            ..Factory::new(which)
        }
    }
}

#[async_trait::async_trait]
impl leaseq_conformance::BackendFactory for Factory {
    fn name(&self) -> &str {
        match (self.which, self.shards) {
            (Which::RedisRs, None) => "redis-rs",
            (Which::Fred, None) => "fred",
            (Which::RedisRs, Some(_)) => "redis-rs sharded",
            (Which::Fred, Some(_)) => "fred sharded",
        }
    }

    async fn backend(
        &self,
    ) -> Result<leaseq_conformance::TestBackend, leaseq_conformance::Unavailable> {
        let made = self
            .backend
            .get_or_init(|| async {
                let config = RedisOptions::new(&self.cleanup.url)
                    .prefix(&self.cleanup.prefix)
                    .test_hooks(true);
                let made = match self.shards {
                    None => connect(self.which, config).await,
                    Some(k) => connect_sharded(self.which, config, k, None).await,
                };
                made.map_err(|e| e.to_string())
            })
            .await;
        match made {
            Ok(b) => Ok(leaseq_conformance::TestBackend::real(Arc::clone(b))),
            Err(e) => Err(leaseq_conformance::Unavailable(format!(
                "no Redis at {}: {e}",
                self.cleanup.url
            ))),
        }
    }
}

/// A backend of `which` for `config`, sharded over `shards` physical queues
/// named by `namer` and read back by its inverse (default names when
/// `None`).
pub async fn connect_sharded(
    which: Which,
    config: RedisOptions,
    shards: u16,
    namer: Option<Names>,
) -> leaseq_core::Result<Arc<dyn Backend>> {
    fn named<B: Backend>(
        b: leaseq_redis::ShardedBackend<B>,
        namer: Option<Names>,
    ) -> Arc<dyn Backend> {
        match namer {
            Some((n, p)) => Arc::new(
                b.shard_names(move |q, i| n(q, i))
                    .shard_parser(move |q| p(q)),
            ),
            None => Arc::new(b),
        }
    }
    match which {
        #[cfg(feature = "redis-rs")]
        Which::RedisRs => {
            let inner = leaseq_redis::RedisRsBackend::connect(config).await?;
            Ok(named(
                leaseq_redis::ShardedBackend::new(inner, shards)?,
                namer,
            ))
        }
        #[cfg(feature = "fred")]
        Which::Fred => {
            let inner = leaseq_redis::FredBackend::connect(config).await?;
            Ok(named(
                leaseq_redis::ShardedBackend::new(inner, shards)?,
                namer,
            ))
        }
        #[allow(unreachable_patterns)]
        _ => Err(leaseq_core::Error::invalid(format!(
            "client {} not built",
            which.name()
        ))),
    }
}

/// Custom shard names and their inverse.
pub type Names = (leaseq_redis::ShardNamer, leaseq_redis::ShardParser);

/// A conformance factory on the local cluster shared by the test binary:
/// one backend per check (each check builds its own runtime), plain or
/// sharded, under a prefix of its own deleted when dropped.
pub struct ClusterFactory {
    which: Which,
    shards: Option<(u16, Option<Names>)>,
    prefix: String,
    backend: tokio::sync::OnceCell<Result<Arc<dyn Backend>, String>>,
}

impl std::fmt::Debug for ClusterFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterFactory")
            .field("which", &self.which)
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl ClusterFactory {
    /// Plain queues.
    pub fn new(which: Which) -> Self {
        ClusterFactory {
            which,
            shards: None,
            prefix: fresh_prefix(&format!("c{}", which.name())),
            backend: tokio::sync::OnceCell::new(),
        }
    }

    /// Queues sharded `shards` ways, shards named by `namer` (and read back
    /// by its inverse).
    pub fn sharded(which: Which, shards: u16, namer: Option<Names>) -> Self {
        let mut f = Self::new(which);
        f.shards = Some((shards, namer));
        f
    }

    /// Queues sharded `shards` ways under `prefix`.
    pub fn sharded_with_prefix(
        which: Which,
        shards: u16,
        prefix: String,
        namer: Option<Names>,
    ) -> Self {
        let mut f = Self::sharded(which, shards, namer);
        f.prefix = prefix;
        f
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

impl Drop for ClusterFactory {
    fn drop(&mut self) {
        if let Ok(c) = cluster::shared() {
            c.delete_prefix(&self.prefix);
        }
    }
}

#[async_trait::async_trait]
impl leaseq_conformance::BackendFactory for ClusterFactory {
    fn name(&self) -> &str {
        match (self.which, &self.shards) {
            (Which::RedisRs, None) => "redis-rs cluster",
            (Which::Fred, None) => "fred cluster",
            (Which::RedisRs, Some(_)) => "redis-rs cluster sharded",
            (Which::Fred, Some(_)) => "fred cluster sharded",
        }
    }

    async fn backend(
        &self,
    ) -> Result<leaseq_conformance::TestBackend, leaseq_conformance::Unavailable> {
        let made = self
            .backend
            .get_or_init(|| async {
                let cluster = cluster::shared()?;
                let config = cluster.config(&self.prefix);
                let made = match &self.shards {
                    None => connect(self.which, config).await,
                    Some((k, namer)) => {
                        connect_sharded(self.which, config, *k, namer.clone()).await
                    }
                };
                made.map_err(|e| e.to_string())
            })
            .await;
        match made {
            Ok(b) => Ok(leaseq_conformance::TestBackend::real(Arc::clone(b))),
            Err(e) => Err(leaseq_conformance::Unavailable(format!(
                "no local Redis Cluster: {e}"
            ))),
        }
    }
}

/// One `#[tokio::test]` per case and client: `case(Which::RedisRs)` and
/// `case(Which::Fred)`, each in a module named after the client.
#[allow(unused_macros)]
macro_rules! for_each_client {
    ($($case:ident),* $(,)?) => {
        #[cfg(feature = "redis-rs")]
        mod redis_rs {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() { super::$case(super::Which::RedisRs).await })*
        }
        #[cfg(feature = "fred")]
        mod fred {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() { super::$case(super::Which::Fred).await })*
        }
    };
}
