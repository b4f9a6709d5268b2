//! A private redis-server (append-only, fsync always) is SIGKILLed during a
//! storm of producers, workers and a reaper, and started again on the same
//! data dir. Workers resume by themselves; no item whose enqueue returned Ok
//! is lost, and none is acked twice.
#![cfg(any(feature = "redis-rs", feature = "fred"))]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::server::PrivateServer;
use common::Which;
use leaseq_core::{Backend, BackendExt, Error, NewItem, QueueName};
use leaseq_redis::RedisOptions;

const PRODUCERS: usize = 2;
const BATCHES: usize = 120;
const BATCH: usize = 4;
const WORKERS: usize = 3;
const TTL: Duration = Duration::from_secs(2);
/// Pause after a failed call: a retry backoff, not a timing assumption.
const BACKOFF: Duration = Duration::from_millis(50);

#[derive(Default)]
struct Ledger {
    enqueued_ok: BTreeSet<String>,
    acked_ok: BTreeMap<String, u32>,
    /// An ack that failed on the wire, then found the item gone.
    ack_uncertain: BTreeSet<String>,
}

#[derive(Default)]
struct Flags {
    batches: AtomicU64,
    errors: AtomicU64,
    restarted: AtomicBool,
    acks_after_restart: AtomicU64,
    stop: AtomicBool,
}

async fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn produce(
    b: Arc<dyn Backend>,
    q: QueueName,
    p: usize,
    ledger: Arc<Mutex<Ledger>>,
    flags: Arc<Flags>,
) {
    for n in 0..BATCHES {
        let payloads: Vec<String> = (0..BATCH).map(|i| format!("w{p}-{n}-{i}")).collect();
        let items = payloads
            .iter()
            .map(|s| NewItem::new(s.clone().into_bytes()))
            .collect();
        match b.enqueue(&q, items).await {
            Ok(_) => ledger.lock().expect("ledger").enqueued_ok.extend(payloads),
            Err(_) => {
                // Unknown whether it was written: never retried, so a payload
                // can never exist twice.
                flags.errors.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(BACKOFF).await;
            }
        }
        flags.batches.fetch_add(1, Ordering::SeqCst);
    }
}

async fn work(b: Arc<dyn Backend>, q: QueueName, ledger: Arc<Mutex<Ledger>>, flags: Arc<Flags>) {
    while !flags.stop.load(Ordering::SeqCst) {
        let claimed = match b.claim_up_to(&q, 4, TTL).await {
            Ok(c) => c,
            Err(_) => {
                flags.errors.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
        };
        if claimed.leases.is_empty() {
            b.wait_for_work(&q, Duration::from_millis(200)).await;
            continue;
        }
        for lease in claimed.leases {
            let payload = String::from_utf8_lossy(&lease.payload).into_owned();
            let mut failed_once = false;
            loop {
                match b.ack(&lease.key).await {
                    Ok(()) => {
                        *ledger
                            .lock()
                            .expect("ledger")
                            .acked_ok
                            .entry(payload)
                            .or_insert(0) += 1;
                        if flags.restarted.load(Ordering::SeqCst) {
                            flags.acks_after_restart.fetch_add(1, Ordering::SeqCst);
                        }
                        break;
                    }
                    Err(Error::LeaseLost { .. }) => {
                        if failed_once
                            && matches!(b.item(&q, lease.id()).await, Err(Error::NotFound { .. }))
                        {
                            ledger.lock().expect("ledger").ack_uncertain.insert(payload);
                        }
                        break;
                    }
                    Err(_) => {
                        failed_once = true;
                        flags.errors.fetch_add(1, Ordering::SeqCst);
                        if flags.stop.load(Ordering::SeqCst) {
                            break;
                        }
                        tokio::time::sleep(BACKOFF).await;
                    }
                }
            }
        }
    }
}

async fn reap(b: Arc<dyn Backend>, q: QueueName, flags: Arc<Flags>) {
    while !flags.stop.load(Ordering::SeqCst) {
        let _ = b.reap(&q).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn storm_across_sigkill(which: Which) {
    let mut server = match PrivateServer::start() {
        Ok(s) => s,
        Err(e) => {
            common::unavailable("a private redis-server", e);
            return;
        }
    };
    let config = RedisOptions::new(server.url())
        .prefix("storm")
        .test_hooks(true)
        .response_timeout(Duration::from_secs(1));
    let b = common::connect(which, config).await.expect("connect");
    assert!(
        b.capabilities().durable,
        "read from the server: appendonly yes, appendfsync always"
    );
    let q = QueueName::new("storm").expect("valid");
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let flags = Arc::new(Flags::default());

    let mut tasks = Vec::new();
    for p in 0..PRODUCERS {
        tasks.push(tokio::spawn(produce(
            b.clone(),
            q.clone(),
            p,
            ledger.clone(),
            flags.clone(),
        )));
    }
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        workers.push(tokio::spawn(work(
            b.clone(),
            q.clone(),
            ledger.clone(),
            flags.clone(),
        )));
    }
    workers.push(tokio::spawn(reap(b.clone(), q.clone(), flags.clone())));

    let third = (PRODUCERS * BATCHES / 3) as u64;
    wait_until("a third of the batches", Duration::from_secs(60), || {
        flags.batches.load(Ordering::SeqCst) >= third
    })
    .await;
    server.kill();
    wait_until(
        "clients to notice the kill",
        Duration::from_secs(30),
        || flags.errors.load(Ordering::SeqCst) > 0,
    )
    .await;
    server.restart().expect("restart on the same dir");
    flags.restarted.store(true, Ordering::SeqCst);

    for t in tasks {
        t.await.expect("producer");
    }
    let all_done = || {
        let l = ledger.lock().expect("ledger");
        l.enqueued_ok
            .iter()
            .all(|p| l.acked_ok.contains_key(p) || l.ack_uncertain.contains(p))
    };
    wait_until(
        "every Ok'd item to be acked",
        Duration::from_secs(120),
        all_done,
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // Items whose enqueue failed on the wire may still exist: drained too.
        if b.stats(&q).await.map(|s| s.total() == 0).unwrap_or(false) {
            break;
        }
        assert!(Instant::now() < deadline, "the queue never drained");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    flags.stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.expect("worker");
    }

    let l = ledger.lock().expect("ledger");
    let twice: Vec<_> = l.acked_ok.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "acked twice: {twice:?}");
    let lost: Vec<_> = l
        .enqueued_ok
        .iter()
        .filter(|p| !l.acked_ok.contains_key(*p) && !l.ack_uncertain.contains(*p))
        .collect();
    assert!(lost.is_empty(), "lost: {lost:?}");
    assert!(flags.errors.load(Ordering::SeqCst) > 0, "the kill was felt");
    assert!(
        flags.acks_after_restart.load(Ordering::SeqCst) > 0,
        "work resumed"
    );
    println!(
        "{}: {} enqueued Ok, {} acked Ok, {} acks with an unknown reply, {} failed calls",
        which.name(),
        l.enqueued_ok.len(),
        l.acked_ok.len(),
        l.ack_uncertain.len(),
        flags.errors.load(Ordering::SeqCst)
    );
}

#[cfg(feature = "redis-rs")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rs_survives_sigkill_mid_storm() {
    storm_across_sigkill(Which::RedisRs).await;
}

#[cfg(feature = "fred")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fred_survives_sigkill_mid_storm() {
    storm_across_sigkill(Which::Fred).await;
}
