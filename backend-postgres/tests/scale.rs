//! Measurements at scale, not tests: each is `#[ignore]`d and prints what it
//! measured. Run one with, e.g.
//!
//! ```sh
//! LEASEQ_SCALE_CHURN=300000 LEASEQ_SCALE_EXPIRED=30000 \
//!   cargo test --release -p leaseq-postgres --test scale -- --ignored --nocapture reap_after_churn
//! ```
//!
//! `LEASEQ_SCALE_KEEP=1` keeps the schema (its name is printed) for a look
//! with `psql`; drop it by hand afterwards.

mod common;

use leaseq_core::BackendExt as _;
use std::time::{Duration, Instant};

use leaseq_core::{Backend, ClaimSpec, LeaseKey, NewItem, QueueName};
use leaseq_postgres::PgBackend;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Scratch {
    backend: PgBackend,
    schema: String,
}

impl Scratch {
    async fn new(tag: &str) -> Option<Scratch> {
        if !common::server_or_skip().await {
            return None;
        }
        let schema = common::fresh_schema(tag);
        let backend = PgBackend::connect(&common::url(), common::options(&schema))
            .await
            .expect("connect and migrate");
        println!("schema {schema}");
        Some(Scratch { backend, schema })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var("LEASEQ_SCALE_KEEP").is_ok_and(|v| v == "1") {
            println!("kept schema {}", self.schema);
        } else {
            common::drop_schema_blocking(self.schema.clone());
        }
    }
}

/// Enqueues `n` items in batches of 1000.
async fn fill(b: &PgBackend, q: &QueueName, n: u64) {
    let mut left = n;
    while left > 0 {
        let k = left.min(1000);
        let items = (0..k).map(|i| NewItem::new(format!("item {i}"))).collect();
        b.enqueue(q, items).await.expect("enqueue");
        left -= k;
    }
}

/// Claims every Ready item of `q` with `ttl`, in claims of 1000.
async fn lease_all(b: &PgBackend, q: &QueueName, ttl: Duration) -> Vec<LeaseKey> {
    let mut keys = Vec::new();
    loop {
        let c = b
            .claim(q, ClaimSpec::new(1000, ttl).expect("spec"))
            .await
            .expect("claim");
        if c.leases.is_empty() {
            return keys;
        }
        keys.extend(c.leases.into_iter().map(|l| l.key));
    }
}

/// `expired` leases left to expire, then one timed `reap()`.
async fn time_reap(b: &PgBackend, q: &QueueName, expired: u64) -> Duration {
    fill(b, q, expired).await;
    let keys = lease_all(b, q, Duration::from_millis(1)).await;
    assert_eq!(keys.len() as u64, expired);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let t = Instant::now();
    let r = b.reap(q).await.expect("reap");
    let took = t.elapsed();
    assert_eq!(r.requeued + r.dead, expired, "{r:?}");
    println!(
        "reap of {expired} expired leases: {took:?} ({:.1} µs per lease)",
        took.as_secs_f64() * 1e6 / expired as f64
    );
    took
}

/// One `reap()` of `LEASEQ_SCALE_EXPIRED` expired leases on a fresh table,
/// then the same after `LEASEQ_SCALE_CHURN` items went through the table
/// (enqueue, claim, ack, in batches of 1000). With
/// `LEASEQ_SCALE_HOLD_SNAPSHOT=1` another session holds a snapshot taken
/// before the churn until after the reap (a long transaction, a backup),
/// so nothing the churn left behind can be marked dead in the indexes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run by hand"]
async fn reap_after_churn() {
    let churn = env_or("LEASEQ_SCALE_CHURN", 300_000);
    let expired = env_or("LEASEQ_SCALE_EXPIRED", 30_000);
    let hold = env_or("LEASEQ_SCALE_HOLD_SNAPSHOT", 0) == 1;
    let Some(s) = Scratch::new("scale_reap").await else {
        return;
    };
    let b = &s.backend;
    let fresh = QueueName::new("fresh").expect("name");
    time_reap(b, &fresh, expired).await;
    b.admin()
        .expect("admin")
        .purge(&fresh)
        .await
        .expect("purge");

    let mut holder = None;
    if hold {
        let mut tx = b.pool().begin().await.expect("begin");
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            .execute(&mut *tx)
            .await
            .expect("isolation");
        sqlx::query("SELECT 1")
            .execute(&mut *tx)
            .await
            .expect("snapshot");
        holder = Some(tx);
    }
    let q = QueueName::new("churned").expect("name");
    let t = Instant::now();
    let (mut te, mut tc, mut ta) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut left = churn;
    while left > 0 {
        let k = left.min(1000);
        let t0 = Instant::now();
        fill(b, &q, k).await;
        let t1 = Instant::now();
        let keys = lease_all(b, &q, Duration::from_secs(1)).await;
        let t2 = Instant::now();
        for r in b.ack_many(&keys).await.expect("ack_many") {
            r.expect("ack");
        }
        te += t1 - t0;
        tc += t2 - t1;
        ta += t2.elapsed();
        left -= k;
    }
    println!(
        "churned {churn} items in {:?} (enqueue {te:?}, claim {tc:?}, ack {ta:?})",
        t.elapsed()
    );
    // Every churned lease's expiry is now in the past, ahead of the ones
    // about to be reaped.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // An empty reap walks the entries the churn left in the leased index:
    // the first visits their rows (and marks the entries), later ones
    // still read the marked entries, until vacuum removes them.
    for round in ["first", "second", "third"] {
        let t = Instant::now();
        let r = b.reap(&q).await.expect("empty reap");
        assert_eq!(r.recovered(), 0, "{r:?}");
        println!("{round} empty reap after the churn: {:?}", t.elapsed());
    }
    time_reap(b, &q, expired).await;
    if let Some(tx) = holder {
        tx.rollback().await.expect("rollback");
    }
    // What the documented fix does: a vacuum removes the dead entries.
    let t = Instant::now();
    sqlx::query(&format!("VACUUM \"{}\".leaseq_items", s.schema))
        .execute(b.pool())
        .await
        .expect("vacuum");
    println!("VACUUM after the churn: {:?}", t.elapsed());
    let t = Instant::now();
    let r = b.reap(&q).await.expect("empty reap");
    assert_eq!(r.recovered(), 0, "{r:?}");
    println!("empty reap after the vacuum: {:?}", t.elapsed());
}

/// Median of five `stats()` calls on queue `q`.
async fn median_stats(b: &PgBackend, q: &QueueName) -> Duration {
    let mut v = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        b.stats(q).await.expect("stats");
        v.push(t.elapsed());
    }
    v.sort();
    v[2]
}

/// `stats()` of one queue among `LEASEQ_SCALE_QUEUES` queues of
/// `LEASEQ_SCALE_PER_QUEUE` items (inserted with SQL), then of one queue of
/// `LEASEQ_SCALE_BIG` items next to them (0: skipped): median of 5 each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run by hand"]
async fn stats_at_scale() {
    let queues = env_or("LEASEQ_SCALE_QUEUES", 10_000);
    let per = env_or("LEASEQ_SCALE_PER_QUEUE", 100);
    let big = env_or("LEASEQ_SCALE_BIG", 0);
    let Some(s) = Scratch::new("scale_stats").await else {
        return;
    };
    let b = &s.backend;
    let pool = b.pool();
    let t = Instant::now();
    // A quarter of each queue in each state.
    let insert = format!(
        "INSERT INTO \"{}\".leaseq_items \
           (queue, state, payload, attempts, max_attempts, token, lease_expires_at, \
            available_at, dead_at) \
         SELECT $3 || (n % $1), st, 'x', 1, 3, \
                CASE WHEN st = 'leased' THEN gen_random_uuid() END, \
                CASE WHEN st = 'leased' THEN now() + interval '1 hour' END, \
                CASE WHEN st = 'scheduled' THEN now() + interval '1 hour' ELSE now() END, \
                CASE WHEN st = 'dead' THEN now() END \
         FROM (SELECT n, (ARRAY['ready','scheduled','leased','dead'])[1 + (n / $1) % 4] AS st \
               FROM generate_series(0, $2 - 1) n) g",
        s.schema
    );
    sqlx::query(&insert)
        .bind(i64::try_from(queues).expect("fits"))
        .bind(i64::try_from(queues * per).expect("fits"))
        .bind("q")
        .execute(pool)
        .await
        .expect("insert");
    if big > 0 {
        sqlx::query(&insert)
            .bind(1_i64)
            .bind(i64::try_from(big).expect("fits"))
            .bind("big")
            .execute(pool)
            .await
            .expect("insert big");
    }
    sqlx::query(&format!("VACUUM ANALYZE \"{}\".leaseq_items", s.schema))
        .execute(pool)
        .await
        .expect("vacuum");
    println!("filled in {:?}", t.elapsed());
    let small = QueueName::new("q42").expect("name");
    println!(
        "stats of one queue of {per} among {queues}: {:?} (median of 5)",
        median_stats(b, &small).await
    );
    if big > 0 {
        let big_q = QueueName::new("big0").expect("name");
        println!(
            "stats of one queue of {big}: {:?} (median of 5)",
            median_stats(b, &big_q).await
        );
    }
}
