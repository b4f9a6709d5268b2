//! A handle from `leaseq::connect(url)` is a production handle: it offers
//! no test hooks (which could expire live leases or plant index entries),
//! and any such handle can be wrapped by a layer, e.g. sharded.

use leaseq::layer::shard::Sharded;
use leaseq::BackendExt as _;
use leaseq::{Backend, Order};

async fn assert_production_handle(url: &str) {
    let backend = match leaseq::connect(url).await {
        Ok(b) => b,
        Err(e) => {
            leaseq_testkit::env::skip(&format!("no server at {url}"), e);
            return;
        }
    };
    assert!(
        backend.test_hooks().is_none(),
        "connect({url}) returned a handle with test hooks"
    );
    let sharded = Sharded::new(backend, 4).expect("4 shards");
    assert!(
        sharded.test_hooks().is_none(),
        "{url}: sharded handle has hooks"
    );
    assert_eq!(sharded.capabilities().order, Order::PerShard);
    assert!(!sharded.capabilities().atomic_batch);
}

#[tokio::test]
async fn memory_handle_has_no_test_hooks() {
    assert_production_handle("memory://").await;
}

#[cfg(any(feature = "redis", feature = "fred"))]
#[tokio::test]
async fn redis_handle_has_no_test_hooks() {
    assert_production_handle(&leaseq_testkit::env::redis_url()).await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_handle_has_no_test_hooks() {
    assert_production_handle(&leaseq_testkit::env::database_url()).await;
}
