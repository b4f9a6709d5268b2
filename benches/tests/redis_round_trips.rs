//! A single-job claim plus ack on Redis costs at most 2 round trips, and the
//! life of a batch (enqueue, claim, `ack_many`) 3 whatever its size: counted
//! as top-level script calls in `INFO commandstats` of a private server that
//! only this test talks to.
#![cfg(feature = "redis-rs")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq_core::{Backend, BackendExt, LeaseKey, NewItem, QueueName};
use leaseq_redis::RedisOptions;
use leaseq_testkit::{env, redis_server::PrivateRedis};

/// A private server with no persistence, killed when dropped; `None` (after
/// the skip line, or a panic in CI) when it cannot be started.
fn start() -> Option<PrivateRedis> {
    match PrivateRedis::start_volatile() {
        Ok(server) => Some(server),
        Err(e) => {
            env::skip("a private redis-server", e);
            None
        }
    }
}

async fn raw(url: &str) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url).expect("url");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client.get_multiplexed_async_connection().await {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("private server never answered: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Top-level script calls (`EVAL`, `EVALSHA`, their read-only forms) so far.
async fn script_calls(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO");
    info.lines()
        .filter(|l| {
            [
                "cmdstat_eval:",
                "cmdstat_evalsha:",
                "cmdstat_eval_ro:",
                "cmdstat_evalsha_ro:",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        })
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

async fn check(backend: Arc<dyn Backend>, url: &str) {
    let q = QueueName::new("round-trips").expect("queue");
    let mut conn = raw(url).await;
    const JOBS: u64 = 20;
    // Warm up: scripts loaded, connections made.
    backend.push(&q, "warm").await.expect("enqueue");
    let lease = backend
        .claim_one(&q, Duration::from_secs(30))
        .await
        .expect("claim")
        .expect("one");
    backend.ack(&lease.key).await.expect("ack");
    backend.push(&q, "warm").await.expect("enqueue");
    let lease = backend
        .claim_one(&q, Duration::from_secs(30))
        .await
        .expect("claim")
        .expect("one");
    backend
        .ack_many(std::slice::from_ref(&lease.key))
        .await
        .expect("ack_many");
    let items = (0..JOBS).map(|_| NewItem::new("job")).collect();
    backend.enqueue(&q, items).await.expect("enqueue");

    let before = script_calls(&mut conn).await;
    for _ in 0..JOBS {
        let lease = backend
            .claim_one(&q, Duration::from_secs(30))
            .await
            .expect("claim")
            .expect("one");
        backend.ack(&lease.key).await.expect("ack");
    }
    let calls = script_calls(&mut conn).await - before;
    assert_eq!(
        calls,
        2 * JOBS,
        "claim + ack of one job took {calls} script calls for {JOBS} jobs"
    );

    // A batch: one enqueue, one claim and one ack_many, whatever its size.
    const BATCH: usize = 100;
    let before = script_calls(&mut conn).await;
    let items = (0..BATCH).map(|_| NewItem::new("job")).collect();
    backend.enqueue(&q, items).await.expect("enqueue");
    let claimed = backend
        .claim_up_to(&q, BATCH as u32, Duration::from_secs(30))
        .await
        .expect("claim");
    assert_eq!(claimed.leases.len(), BATCH);
    let keys: Vec<LeaseKey> = claimed.leases.iter().map(|l| l.key.clone()).collect();
    let acked = backend.ack_many(&keys).await.expect("ack_many");
    assert!(acked.iter().all(|r| r.is_ok()), "{acked:?}");
    let calls = script_calls(&mut conn).await - before;
    assert_eq!(
        calls, 3,
        "the life of a batch of {BATCH} took {calls} script calls"
    );
}

#[tokio::test]
async fn redis_rs_claim_and_ack_take_two_round_trips() {
    let Some(server) = start() else { return };
    let url = server.url();
    let _ = raw(&url).await;
    let backend = leaseq_redis::RedisRsBackend::connect(RedisOptions::new(&url))
        .await
        .expect("connect");
    check(Arc::new(backend), &url).await;
}

#[cfg(feature = "fred")]
#[tokio::test]
async fn fred_claim_and_ack_take_two_round_trips() {
    let Some(server) = start() else { return };
    let url = server.url();
    let _ = raw(&url).await;
    let backend = leaseq_redis::FredBackend::connect(RedisOptions::new(&url))
        .await
        .expect("connect");
    check(Arc::new(backend), &url).await;
}
