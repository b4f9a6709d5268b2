//! Fault storms on private `redis-server`s, on both clients: a storm of
//! settled producers (each batch sent with `enqueue_once` under a request
//! id of its own until it is answered, so an enqueue whose reply was lost
//! is accounted for), two real workers and their reapers, each on a
//! connection of its own, judged by a per-id ledger that also checks that
//! no id ever names two payloads.
//!
//! On a durable server (append-only, fsync always) the faults are: the
//! server stopped (`SIGSTOP`) past the lease ttl and the clients' timeouts,
//! then continued; `DEBUG SLEEP` past the timeouts; the server stopped
//! with calls in flight, then SIGKILLed and restarted (a restart while a
//! claim or ack is in flight); `maxmemory` below what the server holds
//! under `noeviction`, so enqueues are refused `Full` while the workers
//! drain; and `CLIENT KILL` of every client. After each, the storm resumes
//! by itself and the indexes are consistent; in the end every item whose
//! enqueue returned Ok was acked exactly once (or Dead), nothing ran after
//! its ack, and no batch was written twice. The same holds for a SIGKILL
//! on an append-only file fsynced every second.
//!
//! Where the server takes writes back (restarted from an older RDB
//! snapshot, or with no persistence at all), and under an evicting
//! `maxmemory-policy`, items can be lost and acked items run again, as the
//! docs/production.md says; what must still hold there: no id names two payloads
//! (after a restart the ids skip ahead), no worker panics, hangs or stops,
//! and the queue drains once the fault heals. Those figures are printed.
//!
//! An operated storm (a durable server, no faults) adds an operator who
//! cancels items and pauses and resumes the queue at random
//! (`leaseq_reliability::operated`), on both clients.
//!
//! `LEASEQ_STORM_SECS=N` runs every storm on both clients with each fault
//! held longer and N seconds of storm between faults (and the operated
//! storm N seconds).

use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq_core::{Backend, QueueName};
use leaseq_redis::RedisOptions;
use leaseq_reliability::env;
use leaseq_reliability::factories::RedisClient;
use leaseq_reliability::operated::{operated_storm, Handles};
use leaseq_reliability::operator::OperatorConfig;
use leaseq_reliability::redis_server::PrivateRedis;
use leaseq_reliability::storm::{indexes_consistent, Ending, Storm, StormConfig};

/// Acks that prove the workers are working again.
const RESUMED: u64 = 40;
/// The longest the workers may take to resume after a fault.
const RESUME_LIMIT: Duration = Duration::from_secs(30);
/// The clients' response timeout.
const TIMEOUT: Duration = Duration::from_secs(1);
/// The workers' lease ttl: a stall outlives both.
const TTL: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// SIGSTOP past the ttl and the timeouts, then SIGCONT.
    Stall,
    /// `DEBUG SLEEP` past the timeouts.
    DebugSleep,
    /// SIGSTOP until calls are in flight, then SIGKILL and restart.
    KillInFlight,
    /// SIGKILL and restart.
    Kill,
    /// `maxmemory` under what is used, `noeviction`, then lifted.
    Oom,
    /// `maxmemory` under what is used, `volatile-lru` (only keys with a
    /// ttl may go: `enqueue_once` records), then lifted.
    OomVolatileLru,
    /// `maxmemory` under what is used, `allkeys-lru` (any key may go: items,
    /// indexes, the id counter and its copy), then lifted.
    OomAllKeysLru,
    /// `SAVE` now; after some storm, SIGKILL and restart from that
    /// snapshot.
    Rollback,
    /// `CLIENT KILL` of every normal client.
    ClientKill,
}

/// Storm seconds between faults, and how long a stall lasts.
fn pace() -> (Duration, Duration) {
    match env::number("LEASEQ_STORM_SECS", 0) {
        0 => (
            Duration::from_millis(500),
            TTL + Duration::from_millis(1_500),
        ),
        n => (Duration::from_secs(n), TTL * 3),
    }
}

fn heavy() -> bool {
    env::number("LEASEQ_STORM_SECS", 0) > 0
}

async fn connect(client: RedisClient, url: &str, evicting: bool) -> Arc<dyn Backend> {
    let config = RedisOptions::new(url)
        .prefix("storm")
        .test_hooks(true)
        .allow_eviction(evicting)
        .response_timeout(TIMEOUT)
        .connect_timeout(TIMEOUT);
    client.connect(config).await.expect("connect")
}

fn info_field(server: &PrivateRedis, section: &str, field: &str) -> Option<u64> {
    server.info_number(section, field)
}

async fn wait_for_failures(storm: &Storm, before: u64, limit: Duration) -> bool {
    let start = Instant::now();
    while storm.failures() == before {
        if start.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Injects `fault` and heals it; returns a note on what it did.
async fn inject(server: &mut PrivateRedis, storm: &Storm, fault: Fault) -> String {
    let (between, stall) = pace();
    let before = storm.failures();
    match fault {
        Fault::Stall => {
            server.signal("STOP").expect("SIGSTOP");
            tokio::time::sleep(stall).await;
            server.signal("CONT").expect("SIGCONT");
            format!("stopped {}ms", stall.as_millis())
        }
        Fault::DebugSleep => {
            // From a thread: the command's own reply takes the whole sleep.
            let url = server.url();
            let secs = format!("{:.1}", stall.as_secs_f64());
            let arg = secs.clone();
            let sleeper = std::thread::spawn(move || {
                leaseq_testkit::redis_server::command(
                    &url,
                    &["DEBUG", "SLEEP", &arg],
                    Duration::from_secs(2),
                )
            });
            let start = Instant::now();
            while !sleeper.is_finished() && start.elapsed() < stall * 4 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let r = sleeper.join().expect("the sleeper thread");
            format!("DEBUG SLEEP {secs}: {r:?}")
        }
        Fault::KillInFlight => {
            server.signal("STOP").expect("SIGSTOP");
            // Calls go out and wait for replies that never come.
            let felt = wait_for_failures(storm, before, Duration::from_secs(10)).await;
            tokio::task::block_in_place(|| server.restart()).expect("restart");
            format!("killed while stopped (calls timed out first: {felt})")
        }
        Fault::Kill => {
            tokio::task::block_in_place(|| server.restart()).expect("restart");
            "killed and restarted".into()
        }
        Fault::Oom | Fault::OomVolatileLru | Fault::OomAllKeysLru => {
            let used = info_field(server, "memory", "used_memory").expect("used_memory");
            let data = info_field(server, "memory", "used_memory_dataset").unwrap_or(used / 2);
            // Under an evicting policy a third of the data set must go.
            let (policy, limit) = match fault {
                Fault::OomVolatileLru => ("volatile-lru", used.saturating_sub(data / 3)),
                Fault::OomAllKeysLru => ("allkeys-lru", used.saturating_sub(data / 3)),
                _ => ("noeviction", used / 2),
            };
            let evicted_before = info_field(server, "stats", "evicted_keys").unwrap_or(0);
            server
                .command(&["CONFIG", "SET", "maxmemory-policy", policy])
                .expect("policy");
            server
                .command(&["CONFIG", "SET", "maxmemory", &limit.to_string()])
                .expect("maxmemory");
            tokio::time::sleep(stall).await;
            server
                .command(&["CONFIG", "SET", "maxmemory", "0"])
                .expect("maxmemory 0");
            server
                .command(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])
                .expect("noeviction");
            let evicted = info_field(server, "stats", "evicted_keys").unwrap_or(0) - evicted_before;
            format!(
                "maxmemory {limit} of {used} used under {policy} for {}ms, {evicted} keys evicted",
                stall.as_millis()
            )
        }
        Fault::Rollback => {
            server.command(&["SAVE"]).expect("SAVE");
            let acks = storm.ledger.acks();
            tokio::time::sleep(between.max(Duration::from_secs(1))).await;
            tokio::task::block_in_place(|| server.restart()).expect("restart");
            format!(
                "restarted from a snapshot {} acks old",
                storm.ledger.acks() - acks
            )
        }
        Fault::ClientKill => {
            let n = server
                .command(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"])
                .expect("client kill");
            format!("CLIENT KILL: {n:?}")
        }
    }
}

/// Whether the store keeps every write answered Ok through `schedule`.
fn strict(schedule: &[Fault], volatile: bool) -> bool {
    !volatile
        && !schedule.iter().any(|f| {
            matches!(
                f,
                Fault::Rollback | Fault::OomVolatileLru | Fault::OomAllKeysLru
            )
        })
}

#[derive(Debug, Clone, Copy)]
enum Store {
    /// `appendfsync always`.
    Durable,
    /// `appendfsync everysec`.
    EverySec,
    /// Nothing on disk but what `SAVE` writes.
    Volatile,
}

async fn storm(client: RedisClient, store: Store, schedule: &[Fault]) -> Ending {
    operated(client, store, schedule, false).await
}

/// A storm, with an operator who cancels, pauses and resumes when
/// `operator` is set.
async fn operated(client: RedisClient, store: Store, schedule: &[Fault], operator: bool) -> Ending {
    let started = match store {
        Store::Durable => PrivateRedis::start(),
        Store::EverySec => PrivateRedis::start_everysec(),
        Store::Volatile => PrivateRedis::start_volatile(),
    };
    let mut server = match started {
        Ok(s) => s,
        Err(e) => {
            env::skip("a private redis-server", e);
            return Ending::skipped();
        }
    };
    let evicting = schedule
        .iter()
        .any(|f| matches!(f, Fault::OomVolatileLru | Fault::OomAllKeysLru));
    // Only a policy that may evict the counter and its copy may hand an
    // id out again (docs/production.md: an evicting policy drops the id counter).
    let ids_kept = !schedule.contains(&Fault::OomAllKeysLru);
    let url = server.url();
    let producers = vec![
        connect(client, &url, evicting).await,
        connect(client, &url, evicting).await,
    ];
    let workers = vec![
        connect(client, &url, evicting).await,
        connect(client, &url, evicting).await,
    ];
    let observer = connect(client, &url, evicting).await;
    let q = QueueName::new("storm").expect("name");
    let strict = strict(schedule, matches!(store, Store::Volatile));
    let cfg = StormConfig {
        lease_ttl: TTL,
        settled: true,
        work: Duration::from_millis(5),
        long_work: Duration::from_millis(2_500),
        // Where the store loses items they are never acked: the backlog
        // the producers wait on must not count them.
        max_backlog: if strict { 400 } else { u64::MAX / 2 },
        variety: operator,
        ..StormConfig::default()
    };
    let mut storm = Storm::start(producers, workers, q.clone(), cfg).expect("workers build");
    if operator {
        let b = connect(client, &url, evicting).await;
        storm.operate(b, OperatorConfig::default());
    }
    storm
        .progress(RESUMED, Duration::from_secs(30))
        .await
        .expect("the storm gets going");
    let (between, _) = pace();
    let mut log = Vec::new();
    for &fault in schedule {
        tokio::time::sleep(between).await;
        let note = inject(&mut server, &storm, fault).await;
        let took = storm
            .progress(RESUMED, RESUME_LIMIT)
            .await
            .unwrap_or_else(|e| panic!("{} after {fault:?} ({note}): {e}", client.name()));
        if strict {
            indexes_consistent(observer.as_ref(), &q, Duration::from_secs(10))
                .await
                .unwrap_or_else(|e| panic!("{} after {fault:?}: {e}", client.name()));
            storm
                .ledger
                .interim()
                .unwrap_or_else(|e| panic!("{} after {fault:?}: {e}", client.name()));
        }
        log.push(format!(
            "{fault:?} ({note}): resumed in {}ms",
            took.as_millis()
        ));
    }
    let failures = storm.failures();
    // Where the backlog is unbounded it grows for the whole storm, faster
    // than the workers (one item in 64 runs 2.5 s) drain it: the drain is
    // given time in proportion to the storm's length.
    let drain = if strict {
        Duration::from_secs(60)
    } else {
        Duration::from_secs(60) + between * (8 * schedule.len() as u32)
    };
    let end = storm
        .settle(observer.as_ref(), drain)
        .await
        .unwrap_or_else(|e| panic!("{} {store:?} {schedule:?}: {e}", client.name()));
    let verdict = format!(
        "{} {store:?}: {}; {failures} failed calls; {}; unsure, for example: {:?}",
        client.name(),
        log.join("; "),
        end.figures,
        end.unsure
    );
    env::loud(&verdict);
    assert!(
        !ids_kept || end.ids_twice.is_empty(),
        "{verdict}: ids named two payloads: {:?}",
        end.ids_twice
    );
    end.assert_nothing_refused(&verdict);
    if strict {
        indexes_consistent(observer.as_ref(), &q, Duration::from_secs(10))
            .await
            .expect("indexes at the end");
        end.assert_nothing_lost(&verdict);
        assert!(failures > 0, "{verdict}: the faults were felt");
    }
    end
}

trait Skipped {
    fn skipped() -> Self;
}

impl Skipped for Ending {
    fn skipped() -> Self {
        Ending {
            figures: Default::default(),
            verdict: Ok("skipped".into()),
            ids_twice: Vec::new(),
            id_problems: Vec::new(),
            refused: Vec::new(),
            open_outcomes: Vec::new(),
            strays: Vec::new(),
            unsure: Vec::new(),
        }
    }
}

const DURABLE: [Fault; 5] = [
    Fault::Stall,
    Fault::DebugSleep,
    Fault::KillInFlight,
    Fault::Oom,
    Fault::ClientKill,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rs_durable_survives_stalls_sleeps_oom_and_kills_in_flight() {
    storm(RedisClient::RedisRs, Store::Durable, &DURABLE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fred_durable_survives_stalls_sleeps_oom_and_kills_in_flight() {
    storm(RedisClient::Fred, Store::Durable, &DURABLE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_faults_with_an_operator_lose_nothing() {
    let clients: &[RedisClient] = if heavy() {
        &RedisClient::ALL
    } else {
        &[RedisClient::RedisRs]
    };
    for &c in clients {
        operated(c, Store::Durable, &DURABLE, true).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everysec_survives_kills() {
    let clients: &[RedisClient] = if heavy() {
        &RedisClient::ALL
    } else {
        &[RedisClient::Fred]
    };
    for &c in clients {
        storm(c, Store::EverySec, &[Fault::Kill, Fault::KillInFlight]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_rollback_and_volatile_restart_never_reuse_an_id() {
    let clients: &[RedisClient] = if heavy() {
        &RedisClient::ALL
    } else {
        &[RedisClient::RedisRs]
    };
    for &c in clients {
        storm(c, Store::Volatile, &[Fault::Rollback, Fault::Kill]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evicting_policies_neither_hang_nor_stop_the_workers() {
    let clients: &[RedisClient] = if heavy() {
        &RedisClient::ALL
    } else {
        &[RedisClient::Fred]
    };
    for &c in clients {
        storm(
            c,
            Store::Durable,
            &[Fault::OomVolatileLru, Fault::OomAllKeysLru],
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_cancels_pauses_and_resumes_without_losing_an_item() {
    for client in RedisClient::ALL {
        let server = match PrivateRedis::start() {
            Ok(s) => s,
            Err(e) => return env::skip("a private redis-server", e),
        };
        let url = server.url();
        let handles = Handles {
            producers: vec![
                connect(client, &url, false).await,
                connect(client, &url, false).await,
            ],
            workers: vec![
                connect(client, &url, false).await,
                connect(client, &url, false).await,
            ],
            operator: connect(client, &url, false).await,
            observer: connect(client, &url, false).await,
        };
        let q = QueueName::new("operated").expect("name");
        operated_storm(client.name(), handles, q, Duration::from_secs(10)).await;
    }
}
