//! Connection faults: producers, workers and a reaper run while the
//! server kills this pool's connections again and again. The pool
//! reconnects, the work carries on, and every item ends acked or Dead.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaseq_core::{Backend, ClaimSpec, Error, ItemId, ItemState, NewItem, QueueName};
use leaseq_postgres::PgBackend;
use sqlx::{Connection, PgConnection};

const PRODUCERS: usize = 4;
const PER_PRODUCER: usize = 400;
const BATCH: usize = 20;
const WORKERS: usize = 6;
const KILL_ROUNDS: u64 = 5;

/// Connection errors the callers saw (and retried past).
static ERRORS: AtomicU64 = AtomicU64::new(0);

#[derive(Default)]
struct Ledger {
    /// Successful acks per id.
    acked: HashMap<ItemId, u32>,
    /// Ids whose ack failed with a connection error and then found the
    /// lease gone: acked by the first try, or recovered and acked later.
    unsure: HashSet<ItemId>,
    /// Payloads acked (either way).
    payloads: HashSet<String>,
    /// Claims that returned an id after a successful ack of it.
    redelivered_after_ack: Vec<ItemId>,
}

async fn retry<T, F, Fut>(mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if e.is_retryable() => {
                ERRORS.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("unexpected error: {e:?}"),
        }
    }
}

async fn produce(b: PgBackend, queue: QueueName, p: usize) {
    let names: Vec<String> = (0..PER_PRODUCER).map(|i| format!("p{p}-{i}")).collect();
    for chunk in names.chunks(BATCH) {
        // Dedup keys make a retried enqueue idempotent while the item lives.
        let items: Vec<NewItem> = chunk
            .iter()
            .map(|n| NewItem::new(n.clone().into_bytes()).dedup_key(n.clone()))
            .collect();
        retry(|| b.enqueue(&queue, items.clone())).await;
    }
}

async fn work(
    b: PgBackend,
    queue: QueueName,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
    acks: Arc<AtomicU64>,
) {
    let new_spec = || ClaimSpec::new(8, Duration::from_millis(1500)).expect("spec");
    let mut spec = new_spec();
    while !stop.load(Ordering::SeqCst) {
        // After a failure the same claim is sent again (its tokens); after
        // a reply the next claim is a new one, with a spec of its own.
        let claimed = match b.claim(&queue, spec.duplicate()).await {
            Ok(c) => {
                spec = new_spec();
                c
            }
            Err(e) if e.is_retryable() => {
                ERRORS.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Err(e) => panic!("claim: {e:?}"),
        };
        if claimed.leases.is_empty() {
            b.wait_for_work(&queue, Duration::from_millis(100)).await;
            continue;
        }
        for lease in claimed.leases {
            {
                let mut l = ledger.lock().expect("ledger");
                if l.acked.contains_key(&lease.id()) {
                    l.redelivered_after_ack.push(lease.id());
                }
            }
            let mut failed_once = false;
            loop {
                match b.ack(&lease.key).await {
                    Ok(()) => {
                        let mut l = ledger.lock().expect("ledger");
                        *l.acked.entry(lease.id()).or_default() += 1;
                        l.payloads
                            .insert(String::from_utf8_lossy(&lease.payload).into_owned());
                        acks.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                    Err(e) if e.is_lease_lost() => {
                        if failed_once {
                            let mut l = ledger.lock().expect("ledger");
                            l.unsure.insert(lease.id());
                            l.payloads
                                .insert(String::from_utf8_lossy(&lease.payload).into_owned());
                        }
                        break;
                    }
                    Err(e) if e.is_retryable() => {
                        ERRORS.fetch_add(1, Ordering::Relaxed);
                        failed_once = true;
                    }
                    Err(e) => panic!("ack: {e:?}"),
                }
            }
        }
    }
}

async fn kill(app: &str) -> i64 {
    let mut c = PgConnection::connect(&common::url())
        .await
        .expect("killer connects");
    let n: i64 = sqlx::query_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = $1 AND pid <> pg_backend_pid()",
    )
    .bind(app)
    .fetch_one(&mut c)
    .await
    .expect("terminate");
    let _ = c.close().await;
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connections_lose_nothing() {
    if !common::server_or_skip().await {
        return;
    }
    let schema = common::fresh_schema("fault");
    let app = format!("leaseq-fault-{schema}");
    let b = PgBackend::connect(
        &common::url(),
        common::options(&schema).application_name(&app),
    )
    .await
    .expect("connect");
    let queue = QueueName::new("storm").expect("name");
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let acks = Arc::new(AtomicU64::new(0));

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| tokio::spawn(produce(b.clone(), queue.clone(), p)))
        .collect();
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            tokio::spawn(work(
                b.clone(),
                queue.clone(),
                ledger.clone(),
                stop.clone(),
                acks.clone(),
            ))
        })
        .collect();
    let reaper = {
        let (b, queue, stop) = (b.clone(), queue.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let _ = b.reap(&queue).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    // Kill every connection of the pool (the listener's too) each time the
    // workers have made another slice of progress.
    let total = (PRODUCERS * PER_PRODUCER) as u64;
    let mut killed = 0;
    for round in 1..=KILL_ROUNDS {
        let target = total * round / (KILL_ROUNDS + 2);
        tokio::time::timeout(Duration::from_secs(60), async {
            while acks.load(Ordering::SeqCst) < target {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("workers keep making progress between kills");
        let n = kill(&app).await;
        assert!(
            n > 0,
            "round {round}: no connection of the pool was found to kill"
        );
        killed += n;
    }
    for p in producers {
        p.await.expect("producer");
    }
    // Drain: everything not Dead must be acked, with the reaper recovering
    // leases whose claim answer was lost with its connection.
    tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            if let Ok(s) = b.stats(&queue).await {
                if s.ready + s.scheduled + s.leased == 0 {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the queue drains after the faults");
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.expect("worker");
    }
    reaper.await.expect("reaper");

    let dead: HashSet<String> = retry(|| b.peek(&queue, ItemState::Dead, 10_000))
        .await
        .into_iter()
        .map(|i| String::from_utf8_lossy(&i.payload).into_owned())
        .collect();
    let l = std::mem::take(&mut *ledger.lock().expect("ledger"));
    assert!(
        l.redelivered_after_ack.is_empty(),
        "redelivered after ack: {:?}",
        l.redelivered_after_ack
    );
    let twice: Vec<_> = l.acked.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "acked more than once: {twice:?}");
    let mut lost = Vec::new();
    for p in 0..PRODUCERS {
        for i in 0..PER_PRODUCER {
            let name = format!("p{p}-{i}");
            if !l.payloads.contains(&name) && !dead.contains(&name) {
                lost.push(name);
            }
        }
    }
    assert!(
        lost.is_empty(),
        "lost {} items: {:?}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
    eprintln!(
        "faults: {killed} connections killed in {KILL_ROUNDS} rounds, {} errors retried; {} acked, {} unsure acks, {} dead",
        ERRORS.load(Ordering::Relaxed),
        l.acked.len(),
        l.unsure.len(),
        dead.len()
    );
    drop(l);
    drop(b);
    common::drop_schema(&schema).await;
}
