//! A soak behind `LEASEQ_SOAK_SECS` (seconds per backend; unset or 0 skips
//! it): a producer, three workers with reapers, and a worker crashed hard
//! and replaced every few seconds, on memory, Redis and PostgreSQL in turn.
//! Every 10 s: the indexes are consistent (INV-1) and nothing was acked
//! twice or delivered after its ack; the resident memory (VmRSS) is
//! sampled. At the end the queue drains and nothing was lost. Prints
//! throughput and memory at start (after warm-up) and end.
//!
//! `LEASEQ_SOAK_SECS=150 cargo test -p leaseq-reliability --test soak -- --nocapture --test-threads 1`

use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq_core::{Backend, QueueName};
use leaseq_memory::MemoryBackend;
use leaseq_postgres::PgBackend;
use leaseq_redis::RedisOptions;
use leaseq_reliability::env;
use leaseq_reliability::factories::{
    delete_redis_prefix, drop_schema_blocking, fresh_schema, PgFactory, RedisClient,
};
use leaseq_reliability::storm::{indexes_consistent, Storm, StormConfig};

const CHECK_EVERY: Duration = Duration::from_secs(10);
const CRASH_EVERY: Duration = Duration::from_secs(3);
const WARM_UP: Duration = Duration::from_secs(10);

fn seconds() -> Option<u64> {
    match env::number("LEASEQ_SOAK_SECS", 0) {
        0 => {
            eprintln!("skipped: soak: set LEASEQ_SOAK_SECS to the seconds per backend");
            None
        }
        n => Some(n),
    }
}

async fn soak(name: &str, backends: Vec<Arc<dyn Backend>>, secs: u64) {
    let observer = backends[0].clone();
    let q = QueueName::new(format!("soak-{}", env::tag())).expect("name");
    let cfg = StormConfig {
        concurrency: 8,
        batch: 50,
        produce_every: Duration::from_millis(10),
        ..StormConfig::default()
    };
    let mut storm = Storm::start(
        vec![backends[0].clone()],
        backends[1..].to_vec(),
        q.clone(),
        cfg,
    )
    .expect("workers");
    let start = Instant::now();
    let total = Duration::from_secs(secs);
    let (mut next_check, mut next_crash) = (CHECK_EVERY, CRASH_EVERY);
    let mut rss_start = None;
    let mut acks_at_warm = 0;
    let mut samples = Vec::new();
    while start.elapsed() < total {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let t = start.elapsed();
        if rss_start.is_none() && t >= WARM_UP.min(total / 2) {
            rss_start = env::rss_kib();
            acks_at_warm = storm.ledger.acks();
        }
        if t >= next_crash {
            storm
                .crash(storm.crashes() as usize)
                .await
                .expect("replace a worker");
            next_crash += CRASH_EVERY;
        }
        if t >= next_check {
            indexes_consistent(observer.as_ref(), &q, Duration::from_secs(10))
                .await
                .unwrap_or_else(|e| panic!("{name} at {t:?}: {e}"));
            storm
                .ledger
                .interim()
                .unwrap_or_else(|e| panic!("{name} at {t:?}: {e}"));
            let backlog = observer.stats(&q).await.map(|s| s.total()).unwrap_or(0);
            samples.push(format!(
                "{}s: {} acks, backlog {backlog}, rss {} KiB",
                t.as_secs(),
                storm.ledger.acks(),
                env::rss_kib().unwrap_or(0)
            ));
            next_check += CHECK_EVERY;
        }
    }
    let elapsed = start.elapsed();
    let acks = storm.ledger.acks();
    let rss_end = env::rss_kib();
    let crashes = storm.crashes();
    let failures = storm.failures();
    let summary = storm
        .finish(observer.as_ref(), Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    indexes_consistent(observer.as_ref(), &q, Duration::from_secs(10))
        .await
        .expect("indexes at the end");
    let steady = (acks - acks_at_warm) as f64
        / (elapsed.as_secs_f64() - WARM_UP.min(total / 2).as_secs_f64()).max(1.0);
    println!(
        "SOAK {name}: {}s, {acks} acks ({:.0}/s overall, {steady:.0}/s after warm-up), \
         {crashes} worker crashes, {failures} failed calls, RSS {} KiB after warm-up -> {} KiB at the end\n  {}\n  verdict: {summary}",
        elapsed.as_secs(),
        acks as f64 / elapsed.as_secs_f64(),
        rss_start.unwrap_or(0),
        rss_end.unwrap_or(0),
        samples.join("\n  ")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_memory() {
    let Some(secs) = seconds() else { return };
    let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    soak("memory", vec![b.clone(), b.clone(), b.clone(), b], secs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_redis() {
    let Some(secs) = seconds() else { return };
    let url = env::redis_url();
    let prefix = format!("rel-soak-{}", env::tag());
    let mut backends = Vec::new();
    for _ in 0..4 {
        match RedisClient::RedisRs
            .connect(RedisOptions::new(&url).prefix(&prefix).test_hooks(true))
            .await
        {
            Ok(b) => backends.push(b),
            Err(e) => return env::skip(&format!("no Redis at {url}"), e),
        }
    }
    soak("redis", backends, secs).await;
    delete_redis_prefix(&url, &prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_postgres() {
    let Some(secs) = seconds() else { return };
    let url = env::database_url();
    let schema = fresh_schema("soak");
    let mut backends = Vec::new();
    for _ in 0..4 {
        match PgBackend::connect(&url, PgFactory::options(&schema)).await {
            Ok(b) => backends.push(Arc::new(b) as Arc<dyn Backend>),
            Err(e) => return env::skip(&format!("no PostgreSQL at {url}"), e),
        }
    }
    soak("postgres", backends, secs).await;
    drop_schema_blocking(schema);
}
