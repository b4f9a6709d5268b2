//! What the History group costs on Redis, measured, never asserted (run
//! with `--ignored --nocapture`): the ack path of a queue that keeps
//! nothing and of one that keeps its completed items, and `collect` with
//! 10 and with 100,000 kept items, or dead letters, that have not expired
//! (its cost follows what it removes, not what is kept).
#![cfg(feature = "redis-rs")]

mod common;

use std::time::{Duration, Instant};

use leaseq_core::{Backend, BackendExt, Keep, LeaseKey, NewItem, QueueName, Retention};

use common::server::PrivateServer;
use common::Which;

const TTL: Duration = Duration::from_secs(600);

fn median_and_p99(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.99))
}

/// Enqueues `n` items and claims them all: their leases.
async fn leased(b: &dyn Backend, q: &QueueName, n: usize) -> Vec<LeaseKey> {
    let mut keys = Vec::with_capacity(n);
    let mut left = n;
    while left > 0 {
        let k = left.min(1_000);
        let items = (0..k).map(|i| NewItem::new(format!("p{i}"))).collect();
        b.enqueue(q, items).await.expect("enqueue");
        let claimed = b.claim_up_to(q, k as u32, TTL).await.expect("claim");
        keys.extend(claimed.leases.into_iter().map(|l| l.key));
        left -= k;
    }
    keys
}

/// The server's own time per `EVALSHA` since the last `CONFIG RESETSTAT`
/// (`INFO commandstats`), in microseconds.
fn script_usec(server: &PrivateServer) -> f64 {
    let text = match server.command(&["INFO", "commandstats"]) {
        Ok(redis::Value::BulkString(b)) => String::from_utf8_lossy(&b).into_owned(),
        Ok(redis::Value::VerbatimString { text, .. }) => text,
        other => panic!("INFO commandstats answered {other:?}"),
    };
    text.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("usec_per_call=")))
        .and_then(|v| v.trim().parse().ok())
        .expect("usec_per_call of evalsha")
}

/// Median and p99 of one `ack` as the client sees it and the server's
/// time per ack script; the same for one item of a 100-lease `ack_many`.
async fn ack_costs(
    server: &PrivateServer,
    b: &dyn Backend,
    q: &QueueName,
    n: usize,
) -> [(Duration, Duration, f64); 2] {
    let keys = leased(b, q, n).await;
    server.command(&["CONFIG", "RESETSTAT"]).expect("resetstat");
    let mut one = Vec::with_capacity(n);
    for key in &keys {
        let t = Instant::now();
        b.ack(key).await.expect("ack");
        one.push(t.elapsed());
    }
    let one_server = script_usec(server);
    let keys = leased(b, q, n).await;
    server.command(&["CONFIG", "RESETSTAT"]).expect("resetstat");
    let mut many = Vec::with_capacity(n / 100);
    for chunk in keys.chunks(100) {
        let t = Instant::now();
        let acked = b.ack_many(chunk).await.expect("ack_many");
        assert!(acked.iter().all(Result::is_ok));
        many.push(t.elapsed() / chunk.len() as u32);
    }
    let many_server = script_usec(server) / 100.0;
    let (o50, o99) = median_and_p99(one);
    let (m50, m99) = median_and_p99(many);
    [(o50, o99, one_server), (m50, m99, many_server)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn ack_path_cost() {
    // A private server: its command statistics hold only these calls.
    let server = PrivateServer::start_volatile().expect("a private redis-server");
    let options = leaseq_redis::RedisOptions::new(server.url()).prefix("ackcost");
    let b = common::connect(Which::RedisRs, options)
        .await
        .expect("connect");
    let n = 20_000;
    for (name, policy) in [
        ("keeps nothing", Retention::default()),
        (
            "keeps completed (count 1000)",
            Retention::default().completed(Keep::count(1_000)),
        ),
    ] {
        let q = QueueName::new(format!("ack-{}", policy.keeps_any())).expect("name");
        b.history()
            .expect("history")
            .set_retention(&q, policy)
            .await
            .expect("set_retention");
        let [(a50, a99, a_srv), (m50, m99, m_srv)] = ack_costs(&server, b.as_ref(), &q, n).await;
        println!(
            "ack, queue {name}: {n} acks p50 {a50:?} p99 {a99:?}, server {a_srv:.2} us/script; \
             ack_many of 100, per item: p50 {m50:?} p99 {m99:?}, server {m_srv:.2} us"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn collect_cost_with_unexpired_items() {
    let Some((b, _cleanup)) = common::backend(Which::RedisRs, "collectcost").await else {
        return;
    };
    let history = b.history().expect("history");
    for kept in [10usize, 100_000] {
        let q = QueueName::new(format!("collect-{kept}")).expect("name");
        let day = Retention::default().completed(Keep::for_age(Duration::from_secs(86_400)));
        history.set_retention(&q, day).await.expect("set_retention");
        let keys = leased(b.as_ref(), &q, kept).await;
        for chunk in keys.chunks(1_000) {
            b.ack_many(chunk).await.expect("ack_many");
        }
        let listed = history.finished(&q, None, 10).await.expect("finished");
        assert_eq!(listed.len(), kept.min(10));
        let (p50, p99) = collects(history, &q).await;
        println!("collect with {kept} kept unexpired items: 200 collects, p50 {p50:?} p99 {p99:?}");
    }
}

/// Median and p99 of 200 collects of `q`, each of which removes nothing.
async fn collects(history: &dyn leaseq_core::History, q: &QueueName) -> (Duration, Duration) {
    let mut samples = Vec::with_capacity(200);
    for _ in 0..200 {
        let t = Instant::now();
        let removed = history.collect(q).await.expect("collect");
        samples.push(t.elapsed());
        assert_eq!(removed, 0, "nothing has expired");
    }
    median_and_p99(samples)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn collect_cost_with_unexpired_dead_letters() {
    let Some((b, _cleanup)) = common::backend(Which::RedisRs, "deadcost").await else {
        return;
    };
    let history = b.history().expect("history");
    let hooks = b.test_hooks().expect("test hooks");
    for dead in [10usize, 100_000] {
        let q = QueueName::new(format!("dead-{dead}")).expect("name");
        let bound = Keep::for_age(Duration::from_secs(86_400)).at_most(1_000_000);
        let policy = Retention::default().dead(bound);
        history
            .set_retention(&q, policy)
            .await
            .expect("set_retention");
        // Each item's one attempt expires and is reaped: a dead letter.
        let mut left = dead;
        while left > 0 {
            let k = left.min(1_000);
            let items = (0..k)
                .map(|i| NewItem::new(format!("p{i}")).max_attempts(1))
                .collect();
            b.enqueue(&q, items).await.expect("enqueue");
            let claimed = b.claim_up_to(&q, k as u32, TTL).await.expect("claim");
            assert_eq!(claimed.leases.len(), k);
            hooks.expire_leases(&q).await.expect("expire");
            while b.reap(&q).await.expect("reap").dead > 0 {}
            left -= k;
        }
        assert_eq!(b.stats(&q).await.expect("stats").dead, dead as u64);
        let (p50, p99) = collects(history, &q).await;
        println!(
            "collect with {dead} unexpired dead letters: 200 collects, p50 {p50:?} p99 {p99:?}"
        );
    }
}
