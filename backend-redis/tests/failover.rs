//! A forced failover while the replica lags, under a storm, on a local
//! 6-node cluster (3 masters, 3 replicas): producers and workers keep a
//! payload-keyed ledger (every `Ok` enqueue, every handler run and whether
//! its ack was `Ok`); the replica of the queue's master is stopped
//! (`SIGSTOP`) while large payloads clog the link, the master is killed
//! (`SIGKILL`), and the replica is promoted with `CLUSTER FAILOVER
//! TAKEOVER`. A new node joins as the new master's replica, and the queue
//! is drained.
//!
//! What must hold (see the crate docs, "Replicas and failover"):
//! - a lease claimed during the stall and acked after the takeover (no
//!   reaper or worker could take it) answers `Ok` or `LeaseVanished`;
//! - on every setting, no id ever names two payloads (producers after the
//!   failover use a fresh handle, which has seen no id);
//! - with `wait_for_replicas(1, ..)`: no `Ok`-enqueued item is lost (never
//!   delivered) and
//!   no item runs again after an `Ok` ack.
//!
//! Without the wait a forced failover may lose acknowledged writes; the
//! figures are printed, not asserted.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::cluster::{node_text, wait_until, LocalCluster};
use common::Which;
use leaseq_core::settle::{Held, Settle};
use leaseq_core::{Backend, ClaimSpec, Claimed, Error, NewItem, QueueName};
use leaseq_redis::keys::KeyLayout;
use leaseq_redis::RedisOptions;

/// Bytes per payload: enough that a stopped replica's link clogs.
const PAYLOAD: usize = 4096;
const BATCH: u64 = 20;
const TTL: Duration = Duration::from_secs(2);

/// The ledger, keyed by payload tag (`producer-n`).
#[derive(Debug, Default)]
struct Ledger {
    /// Enqueues answered `Ok`: tag → id.
    enqueued: HashMap<String, u64>,
    /// Enqueues that failed (maybe applied).
    failed_enqueues: u64,
    /// Every handler run: tag, id, whether its ack was `Ok`.
    runs: Vec<(String, u64, bool)>,
    /// Acks answered `LeaseLost`.
    lease_lost: u64,
    /// Acks answered `LeaseVanished`.
    vanished: u64,
    /// The slow worker's acks that answered `LeaseVanished`, and any
    /// other error they answered.
    slow_vanished: u64,
    slow_other: Vec<String>,
    /// The first errors seen, for the report.
    errors: Vec<String>,
}

impl Ledger {
    fn error(&mut self, e: &Error) {
        if self.errors.len() < 3 {
            self.errors.push(format!(
                "{e} ({:?})",
                std::error::Error::source(e).map(|s| s.to_string())
            ));
        }
    }
}

/// The figures the ledger gives once the queue is drained.
#[derive(Debug, PartialEq, Eq)]
struct Figures {
    enqueued: usize,
    /// `Ok`-enqueued items no handler ever ran.
    lost: usize,
    /// `Ok`-enqueued items that ran, none of whose acks answered `Ok`.
    never_acked: usize,
    acked_twice: usize,
    ids_with_two_payloads: usize,
}

impl Ledger {
    fn figures(&self) -> Figures {
        let mut acks: HashMap<&str, u32> = HashMap::new();
        let mut ran: HashSet<&str> = HashSet::new();
        let mut payloads: HashMap<u64, HashSet<&str>> = HashMap::new();
        for (tag, id) in &self.enqueued {
            payloads.entry(*id).or_default().insert(tag);
        }
        for (tag, id, acked) in &self.runs {
            payloads.entry(*id).or_default().insert(tag);
            ran.insert(tag);
            if *acked {
                *acks.entry(tag).or_default() += 1;
            }
        }
        Figures {
            enqueued: self.enqueued.len(),
            lost: self
                .enqueued
                .keys()
                .filter(|t| !ran.contains(t.as_str()))
                .count(),
            never_acked: self
                .enqueued
                .keys()
                .filter(|t| ran.contains(t.as_str()) && !acks.contains_key(t.as_str()))
                .count(),
            acked_twice: acks.values().filter(|&&n| n > 1).count(),
            ids_with_two_payloads: payloads.values().filter(|p| p.len() > 1).count(),
        }
    }
}

fn payload(tag: &str) -> Vec<u8> {
    let mut p = format!("{tag}|").into_bytes();
    p.resize(PAYLOAD, b'.');
    p
}

fn tag_of(payload: &[u8]) -> String {
    let end = payload.iter().position(|&b| b == b'|').unwrap_or(0);
    String::from_utf8_lossy(&payload[..end]).into_owned()
}

/// The claim's leases, each with the expiry it was claimed with.
fn held(claimed: &Claimed) -> Vec<Held> {
    claimed
        .leases
        .iter()
        .map(|l| Held {
            key: l.key.clone(),
            until: l.expires_at,
        })
        .collect()
}

/// Enqueues batches until `stop`, recording each `Ok`.
async fn produce(
    b: Arc<dyn Backend>,
    q: QueueName,
    who: String,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
) {
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let tags: Vec<String> = (n..n + BATCH).map(|i| format!("{who}-{i}")).collect();
        n += BATCH;
        let items = tags
            .iter()
            .map(|t| NewItem::new(payload(t)).max_attempts(1_000))
            .collect();
        match b.enqueue(&q, items).await {
            Ok(out) => {
                let mut l = ledger.lock().expect("ledger");
                for (t, e) in tags.into_iter().zip(out) {
                    l.enqueued.insert(t, e.id.get());
                }
            }
            Err(e) => {
                {
                    let mut l = ledger.lock().expect("ledger");
                    l.failed_enqueues += 1;
                    l.error(&e);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Claims, "runs" (records) and acks until `stop`, settling each call.
async fn work(
    b: Arc<dyn Backend>,
    q: QueueName,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
) {
    let settle = Settle::new();
    while !stop.load(Ordering::SeqCst) {
        let spec = ClaimSpec::new(10, TTL).expect("spec");
        let claimed = match settle.claim(b.as_ref(), &q, spec).await {
            Ok(c) => c,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        if claimed.leases.is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        let results = settle.ack_many(b.as_ref(), &held(&claimed)).await;
        let mut l = ledger.lock().expect("ledger");
        for (i, lease) in claimed.leases.iter().enumerate() {
            let acked = match &results {
                Ok(r) => match r.get(i) {
                    Some(Ok(())) => true,
                    Some(Err(Error::LeaseLost { .. })) => {
                        l.lease_lost += 1;
                        false
                    }
                    Some(Err(Error::LeaseVanished { .. })) => {
                        l.vanished += 1;
                        false
                    }
                    _ => false,
                },
                Err(_) => false,
            };
            l.runs
                .push((tag_of(&lease.payload), lease.key.id.get(), acked));
        }
    }
}

/// A worker whose job spans the failover: claims (with a lease that
/// outlives the test) once the replica stalls, and acks once the replica
/// took over. A claim the failover took back is a lease no reaper or
/// worker took from it: its ack must answer `LeaseVanished`, never
/// `LeaseLost`.
async fn slow_work(
    b: Arc<dyn Backend>,
    q: QueueName,
    ledger: Arc<Mutex<Ledger>>,
    stalled: Arc<tokio::sync::Notify>,
    promoted: Arc<tokio::sync::Notify>,
) {
    let settle = Settle::new();
    stalled.notified().await;
    let spec = ClaimSpec::new(10, Duration::from_secs(60)).expect("spec");
    let Ok(claimed) = settle.claim(b.as_ref(), &q, spec).await else {
        return;
    };
    promoted.notified().await;
    // The first send reaches the new master: a send cut off by the dead
    // one is an unknown outcome, which settling reads as landed.
    while b.stats(&q).await.is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let results = settle.ack_many(b.as_ref(), &held(&claimed)).await;
    let mut l = ledger.lock().expect("ledger");
    for (i, lease) in claimed.leases.iter().enumerate() {
        let acked = match results.as_ref().map(|r| r.get(i)) {
            Ok(Some(Ok(()))) => true,
            Ok(Some(Err(Error::LeaseVanished { .. }))) => {
                l.slow_vanished += 1;
                false
            }
            Ok(Some(Err(e))) => {
                l.slow_other.push(e.to_string());
                false
            }
            _ => false,
        };
        l.runs
            .push((tag_of(&lease.payload), lease.key.id.get(), acked));
    }
}

/// Reaps every 200 ms until `stop`.
async fn reap(b: Arc<dyn Backend>, q: QueueName, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        let _ = b.reap(&q).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn is_master(port: u16) -> bool {
    node_text(port, &["INFO", "replication"]).is_ok_and(|i| i.contains("role:master"))
}

async fn connect(which: Which, config: RedisOptions) -> Arc<dyn Backend> {
    common::connect(which, config).await.expect("connect")
}

async fn forced_failover(which: Which, wait: bool) {
    let started = Instant::now();
    let mut cluster = match LocalCluster::start_with_replicas() {
        Ok(c) => c,
        Err(e) => {
            return common::unavailable("a local 6-node Redis Cluster", e);
        }
    };
    let prefix = common::fresh_prefix("failover");
    let base = cluster
        .config(&prefix)
        .response_timeout(Duration::from_secs(2));
    let config = || {
        let c = base.clone();
        if wait {
            c.wait_for_replicas(1, Duration::from_millis(250))
        } else {
            c
        }
    };
    let queue = QueueName::new("storm").expect("name");
    let slot = KeyLayout::new(&prefix, &queue).expect("layout").slot();
    let master = cluster.owner_of(slot).expect("owner");
    wait_until(Duration::from_secs(15), || {
        cluster.replica_of(master).is_ok()
    })
    .expect("the master has a replica");
    let replica = cluster.replica_of(master).expect("replica");
    wait_until(Duration::from_secs(15), || cluster.replica_online(master))
        .expect("the replica is in sync");

    let backend = connect(which, config()).await;
    let ledger: Arc<Mutex<Ledger>> = Arc::default();
    let stop_producers = Arc::new(AtomicBool::new(false));
    let stop_rest = Arc::new(AtomicBool::new(false));
    let mut producers = tokio::task::JoinSet::new();
    let mut rest = tokio::task::JoinSet::new();
    for p in 0..2 {
        producers.spawn(produce(
            backend.clone(),
            queue.clone(),
            format!("a{p}"),
            ledger.clone(),
            stop_producers.clone(),
        ));
    }
    for _ in 0..3 {
        rest.spawn(work(
            backend.clone(),
            queue.clone(),
            ledger.clone(),
            stop_rest.clone(),
        ));
    }
    rest.spawn(reap(backend.clone(), queue.clone(), stop_rest.clone()));
    let stalled = Arc::new(tokio::sync::Notify::new());
    let promoted = Arc::new(tokio::sync::Notify::new());
    if !wait {
        // With waits on, a claim during the stall waits its timeout and is
        // settled for seconds; the waits make no lease vanish anyway.
        rest.spawn(slow_work(
            backend.clone(),
            queue.clone(),
            ledger.clone(),
            stalled.clone(),
            promoted.clone(),
        ));
    }

    // The storm runs, then the replica stalls while writes pile up.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    cluster.signal(replica, "STOP").expect("stop the replica");
    tokio::time::sleep(Duration::from_millis(750)).await;
    stalled.notify_one();
    tokio::time::sleep(Duration::from_millis(750)).await;
    // The handle that enqueued so far stops: its id floor would re-seed
    // the counter, and the point is a client that has seen no id.
    stop_producers.store(true, Ordering::SeqCst);
    while producers.join_next().await.is_some() {}
    stop_producers.store(false, Ordering::SeqCst);
    cluster.signal(master, "KILL").expect("kill the master");
    cluster.signal(replica, "CONT").expect("wake the replica");
    common::cluster::node_text(replica, &["CLUSTER", "FAILOVER", "TAKEOVER"]).expect("takeover");
    wait_until(Duration::from_secs(10), || is_master(replica)).expect("the replica took over");
    promoted.notify_one();
    cluster.add_replica(replica).expect("a new replica");
    wait_until(Duration::from_secs(15), || cluster.replica_online(replica))
        .expect("the new master has a replica in sync");

    // Producers that saw no id before the failover.
    let fresh = connect(which, config()).await;
    for p in 0..2 {
        producers.spawn(produce(
            fresh.clone(),
            queue.clone(),
            format!("b{p}"),
            ledger.clone(),
            stop_producers.clone(),
        ));
    }
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    stop_producers.store(true, Ordering::SeqCst);
    while producers.join_next().await.is_some() {}

    // Drain: until nothing is Ready, Scheduled or Leased (leases the
    // failover left behind expire and are reaped), or 20 s pass.
    let drained = AtomicU64::new(0);
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        if let Ok(s) = backend.stats(&queue).await {
            if s.ready + s.scheduled + s.leased == 0 {
                drained.store(1, Ordering::SeqCst);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop_rest.store(true, Ordering::SeqCst);
    while rest.join_next().await.is_some() {}
    assert_eq!(drained.load(Ordering::SeqCst), 1, "the queue drained");
    assert!(is_master(replica), "the promoted replica is still master");

    let l = ledger.lock().expect("ledger");
    let f = l.figures();
    println!(
        "failover {} wait_for_replicas={}: ok-enqueued {}, lost {}, acked twice {}, \
         ids with two payloads {}; ran but no ack Ok {}, failed enqueues {}, runs {}, \
         acks LeaseLost {}, acks LeaseVanished {}, slow acks LeaseVanished {}; {:.1} s",
        which.name(),
        if wait { "1" } else { "off" },
        f.enqueued,
        f.lost,
        f.acked_twice,
        f.ids_with_two_payloads,
        f.never_acked,
        l.failed_enqueues,
        l.runs.len(),
        l.lease_lost,
        l.vanished,
        l.slow_vanished,
        started.elapsed().as_secs_f64()
    );
    for e in &l.errors {
        println!("  error: {e}");
    }
    assert!(f.enqueued > 0, "the storm enqueued nothing");
    assert_eq!(
        f.ids_with_two_payloads, 0,
        "an id named two payloads: {f:?}"
    );
    assert!(
        l.slow_other.is_empty(),
        "a lease no reaper or worker took answered other than Ok or LeaseVanished: {:?}",
        l.slow_other
    );
    if wait {
        assert_eq!(f.lost, 0, "Ok-enqueued items lost: {f:?}");
        assert_eq!(f.acked_twice, 0, "items run again after an Ok ack: {f:?}");
    }
    cluster.delete_prefix(&prefix);
}

macro_rules! failover_tests {
    ($($name:ident: $which:expr, $wait:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $name() {
            forced_failover($which, $wait).await;
        }
    )*};
}

#[cfg(feature = "redis-rs")]
failover_tests! {
    redis_rs_waits_lose_nothing: Which::RedisRs, true;
    redis_rs_without_waits_keeps_ids_unique: Which::RedisRs, false;
}

#[cfg(feature = "fred")]
failover_tests! {
    fred_waits_lose_nothing: Which::Fred, true;
    fred_without_waits_keeps_ids_unique: Which::Fred, false;
}
