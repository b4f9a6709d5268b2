//! Redis faults during a storm of a producer, two workers (each on its own
//! connection, like two processes) and their reapers, on a private
//! `redis-server` (append-only, fsync always): the server is SIGKILLed and
//! restarted three times, every client connection is cut with `CLIENT KILL`
//! twice, and the script cache is flushed. After each fault the workers
//! resume by themselves and the indexes are consistent (INV-1); in the end
//! every item whose enqueue returned Ok was acked exactly once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq_core::{Backend, QueueName};
use leaseq_redis::RedisOptions;
use leaseq_reliability::env;
use leaseq_reliability::factories::RedisClient;
use leaseq_reliability::redis_server::PrivateRedis;
use leaseq_reliability::storm::{indexes_consistent, Storm, StormConfig};

/// Acks that prove the workers are working again.
const RESUMED: u64 = 40;
/// The longest the workers may take to resume after a fault.
const RESUME_LIMIT: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Copy)]
enum Fault {
    SigKill,
    ClientKill,
    ScriptFlush,
}

const SCHEDULE: [Fault; 6] = [
    Fault::SigKill,
    Fault::ClientKill,
    Fault::ScriptFlush,
    Fault::SigKill,
    Fault::ClientKill,
    Fault::SigKill,
];

async fn connect(client: RedisClient, url: &str) -> Arc<dyn Backend> {
    let config = RedisOptions::new(url)
        .prefix("rel")
        .test_hooks(true)
        .durable(true)
        .response_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(1));
    client.connect(config).await.expect("connect")
}

async fn inject(server: &mut PrivateRedis, storm: &Storm, fault: Fault) {
    match fault {
        Fault::SigKill => {
            let before = storm.failures();
            server.kill();
            let start = Instant::now();
            // Until the clients have noticed (a failed call), then restart.
            while storm.failures() == before && start.elapsed() < Duration::from_secs(10) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            tokio::task::block_in_place(|| server.restart()).expect("restart on the same dir");
        }
        Fault::ClientKill => {
            server
                .command(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"])
                .expect("client kill");
        }
        Fault::ScriptFlush => {
            server.command(&["SCRIPT", "FLUSH"]).expect("script flush");
        }
    }
}

async fn storm_with_faults(client: RedisClient) {
    let mut server = match PrivateRedis::start() {
        Ok(s) => s,
        Err(e) => return env::skip("a private redis-server", e),
    };
    let url = server.url();
    let producer = connect(client, &url).await;
    let workers = vec![connect(client, &url).await, connect(client, &url).await];
    let observer = connect(client, &url).await;
    let q = QueueName::new("storm").expect("name");
    let storm = Storm::start(vec![producer], workers, q.clone(), StormConfig::default())
        .expect("workers build");
    storm
        .progress(RESUMED, Duration::from_secs(30))
        .await
        .expect("the storm gets going");
    let mut resumed = Vec::new();
    for fault in SCHEDULE {
        inject(&mut server, &storm, fault).await;
        let took = storm
            .progress(RESUMED, RESUME_LIMIT)
            .await
            .unwrap_or_else(|e| panic!("after {fault:?}: {e}"));
        indexes_consistent(observer.as_ref(), &q, Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("after {fault:?}: {e}"));
        resumed.push(format!("{fault:?} {}ms", took.as_millis()));
    }
    let failures = storm.failures();
    let verdict = storm
        .finish(observer.as_ref(), Duration::from_secs(60))
        .await;
    let summary = verdict.unwrap_or_else(|e| panic!("{}: {e}", client.name()));
    indexes_consistent(observer.as_ref(), &q, Duration::from_secs(10))
        .await
        .expect("indexes at the end");
    assert!(failures > 0, "the faults were felt");
    println!(
        "{}: {} faults; resumed after {}; {failures} failed calls; {summary}",
        client.name(),
        SCHEDULE.len(),
        resumed.join(", ")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rs_survives_kills_cuts_and_script_flush() {
    storm_with_faults(RedisClient::RedisRs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fred_survives_kills_cuts_and_script_flush() {
    storm_with_faults(RedisClient::Fred).await;
}
