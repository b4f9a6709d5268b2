//! Worker faults on the memory backend (manual clock): a worker task
//! aborted mid-handler, and a handler that never returns while its
//! heartbeats are lost. In both, the lease runs out, a reaper on another
//! worker recovers it, that worker finishes the item, nothing is lost or
//! acked twice, and the indexes stay consistent (INV-1).

use leaseq_core::BackendExt as _;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leaseq_core::layer::fault::{Fault, Faults, Op};
use leaseq_core::{
    handler_fn, Backend, CancellationToken, Error, ItemId, Job, JobContext, JobOutcome,
    ManualClock, NewItem, QueueName, Worker,
};
use leaseq_memory::MemoryBackend;

/// What every worker saw, per item.
#[derive(Debug, Default)]
struct Seen {
    runs: BTreeMap<ItemId, u32>,
    /// The contexts of parked handlers.
    parked: Vec<JobContext>,
    events: Vec<(&'static str, ItemId, JobOutcome)>,
}

type Shared = Arc<Mutex<Seen>>;

fn acks(seen: &Shared, id: ItemId) -> usize {
    let s = seen.lock().expect("seen");
    s.events
        .iter()
        .filter(|(_, i, o)| *i == id && *o == JobOutcome::Acked)
        .count()
}

async fn until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    start.elapsed()
}

/// A worker whose handler parks forever on the items `stuck` names and
/// finishes the others at once.
fn worker(
    name: &'static str,
    b: Arc<dyn Backend>,
    q: &QueueName,
    seen: Shared,
    stuck: impl Fn(&Job) -> bool + Send + Sync + 'static,
    reap: Option<Duration>,
    slots: usize,
) -> Worker {
    let events = seen.clone();
    Worker::builder(b, q.as_str())
        .concurrency(slots)
        .lease_ttl(Duration::from_secs(30))
        .heartbeat_interval(Duration::from_millis(20))
        .reap_interval(reap)
        .idle_wait(Duration::from_millis(20))
        .shutdown_deadline(Duration::from_millis(200))
        .on_event(move |e| {
            events
                .lock()
                .expect("seen")
                .events
                .push((name, e.id, e.outcome.clone()));
        })
        .build(handler_fn(move |job: Job, ctx: JobContext| {
            let park = stuck(&job);
            let mut s = seen.lock().expect("seen");
            *s.runs.entry(job.id).or_insert(0) += 1;
            if park {
                s.parked.push(ctx);
            }
            drop(s);
            async move {
                if park {
                    // Never returns, and ignores cancellation.
                    std::future::pending::<()>().await;
                }
                Ok::<(), Error>(())
            }
        }))
        .expect("worker")
}

async fn consistent(b: &dyn Backend, q: &QueueName) {
    let snap = b
        .test_hooks()
        .expect("hooks")
        .snapshot(q)
        .await
        .expect("snapshot");
    assert!(
        snap.violations().is_empty(),
        "INV-1: {:?}",
        snap.violations()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_aborted_mid_handler_loses_nothing() {
    let clock = ManualClock::new();
    let b: Arc<dyn Backend> =
        Arc::new(MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks());
    let q = QueueName::new("abort").expect("name");
    let ids: Vec<ItemId> = b
        .enqueue(&q, (0..20).map(|i| NewItem::new(format!("j{i}"))).collect())
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();
    let seen = Shared::default();

    // Worker A takes four items and is killed while running them.
    let a = worker("a", b.clone(), &q, seen.clone(), |_| true, None, 4);
    let crashed = tokio::spawn(a.run(CancellationToken::new()));
    let s = seen.clone();
    until("A to start four handlers", Duration::from_secs(10), || {
        s.lock().expect("seen").runs.len() == 4
    })
    .await;
    crashed.abort();
    assert!(crashed.await.expect_err("aborted").is_cancelled());
    let held: Vec<ItemId> = seen.lock().expect("seen").runs.keys().copied().collect();
    assert_eq!(b.stats(&q).await.expect("stats").leased, 4);

    // Worker B does the rest; A's items wait for their leases to run out.
    let stop = CancellationToken::new();
    let reap = Some(Duration::from_millis(20));
    let bw = worker("b", b.clone(), &q, seen.clone(), |_| false, reap, 4);
    let healthy = tokio::spawn(bw.run(stop.clone()));
    let s = seen.clone();
    until(
        "B to finish the 16 free items",
        Duration::from_secs(10),
        || s.lock().expect("seen").events.len() == 16,
    )
    .await;
    for id in &held {
        assert_eq!(
            acks(&seen, *id),
            0,
            "{id} was acked while its lease was live"
        );
    }
    consistent(b.as_ref(), &q).await;
    clock.advance(Duration::from_secs(31));
    let s = seen.clone();
    let resumed = until(
        "B to recover and finish A's items",
        Duration::from_secs(10),
        || ids.iter().all(|id| acks(&s, *id) == 1),
    )
    .await;
    stop.cancel();
    healthy.await.expect("join").expect("B ran");
    consistent(b.as_ref(), &q).await;
    assert_eq!(b.stats(&q).await.expect("stats").total(), 0);
    let runs = seen.lock().expect("seen").runs.clone();
    for id in &ids {
        assert_eq!(acks(&seen, *id), 1, "{id}");
        let runs = runs[id];
        assert_eq!(
            runs,
            if held.contains(id) { 2 } else { 1 },
            "{id} ran {runs} times"
        );
    }
    println!("abort: 4 handlers killed mid-run; recovered and acked {resumed:?} after the leases ran out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_that_never_returns_loses_its_lease() {
    let clock = ManualClock::new();
    let mem = Arc::new(MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks());
    // A network partition that only the heartbeat meets: every `extend`
    // fails (without reaching the store) until the faults are cleared.
    let part = Arc::new(Faults::new(mem.clone()));
    part.inject(Op::Extend, Fault::Refuse, u32::MAX);
    let q = QueueName::new("hang").expect("name");
    let id = mem
        .enqueue(&q, vec![NewItem::new("hangs")])
        .await
        .expect("enqueue")[0]
        .id;
    let seen = Shared::default();

    // A runs the item forever; its heartbeats do not get through.
    let a_stop = CancellationToken::new();
    // One slot, held by the stuck handler: A claims nothing more.
    let a = worker("a", part.clone(), &q, seen.clone(), |_| true, None, 1);
    let a_run = tokio::spawn(a.run(a_stop.clone()));
    let p = part.clone();
    until(
        "A's heartbeats to be refused",
        Duration::from_secs(10),
        || p.fired() >= 3,
    )
    .await;
    let s = seen.clone();
    assert_eq!(s.lock().expect("seen").runs.get(&id), Some(&1));

    // The lease runs out; B's reaper recovers it and B finishes the item.
    clock.advance(Duration::from_secs(31));
    let b_stop = CancellationToken::new();
    let reap = Some(Duration::from_millis(20));
    let bw = worker("b", mem.clone(), &q, seen.clone(), |_| false, reap, 4);
    let b_run = tokio::spawn(bw.run(b_stop.clone()));
    let s = seen.clone();
    let recovered = until(
        "B to recover and ack the item",
        Duration::from_secs(10),
        || acks(&s, id) == 1,
    )
    .await;

    // The partition heals: A's next heartbeat finds the lease lost; A's
    // handler still never returns, so shutdown aborts it after its deadline.
    part.clear();
    let s = seen.clone();
    until(
        "A to learn that its lease is lost",
        Duration::from_secs(10),
        || {
            s.lock()
                .expect("seen")
                .parked
                .iter()
                .any(|ctx| ctx.lease().id == id && ctx.lease_lost() && ctx.is_cancelled())
        },
    )
    .await;
    a_stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), a_run)
        .await
        .expect("A shuts down despite the stuck handler")
        .expect("join")
        .expect("A ran");
    b_stop.cancel();
    b_run.await.expect("join").expect("B ran");

    let a_events: Vec<_> = seen
        .lock()
        .expect("seen")
        .events
        .iter()
        .filter(|(w, _, _)| *w == "a")
        .cloned()
        .collect();
    assert!(
        a_events.iter().all(|(_, _, o)| *o != JobOutcome::Acked),
        "A acked after losing its lease: {a_events:?}"
    );
    assert_eq!(acks(&seen, id), 1);
    assert_eq!(mem.stats(&q).await.expect("stats").total(), 0);
    consistent(mem.as_ref(), &q).await;
    println!(
        "hang: {} heartbeats refused; recovered and acked by another worker {recovered:?} after the lease ran out; A's events {a_events:?}",
        part.fired()
    );
}
