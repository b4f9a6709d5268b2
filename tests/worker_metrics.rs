//! The worker reports through the `metrics` facade: per-queue counters,
//! the in-flight gauge, the handler-duration and wait histograms, and
//! `export_queue_gauges` reports items per state and the store's
//! completion counter, of the queues named or of every queue listed.

use std::sync::Arc;
use std::time::Duration;

use leaseq::{
    async_trait, handler_fn, metric_names, Backend, BackendExt, CancellationToken, Job, JobContext,
    LayeredBackend, MemoryBackend, NewItem, QueueName, Worker,
};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::MetricKind;
use tokio::sync::{mpsc, Semaphore};

fn value<'a>(
    snapshot: &'a [(
        metrics_util::CompositeKey,
        Option<metrics::Unit>,
        Option<metrics::SharedString>,
        DebugValue,
    )],
    kind: MetricKind,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<&'a DebugValue> {
    snapshot.iter().find_map(|(key, _, _, v)| {
        let k = key.key();
        let ok = key.kind() == kind
            && k.name() == name
            && labels
                .iter()
                .all(|(l, val)| k.labels().any(|x| x.key() == *l && x.value() == *val));
        ok.then_some(v)
    })
}

#[test]
fn the_worker_and_the_gauge_task_report_through_the_metrics_facade() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
            let q = QueueName::new("metered").expect("name");
            for i in 0..10 {
                let item = NewItem::new(format!("{i}")).max_attempts(1);
                backend.enqueue_one(&q, item).await.expect("enqueue");
            }
            let worker = Worker::builder(backend.clone(), "metered")
                .concurrency(4)
                .build(handler_fn(|job: Job, _ctx: JobContext| async move {
                    if job.payload.as_ref() == b"3" {
                        return Err(std::io::Error::other("fails for good"));
                    }
                    Ok(())
                }))
                .expect("worker");
            let stop = CancellationToken::new();
            let run = tokio::spawn(worker.run(stop.clone()));
            let gauges = tokio::spawn(leaseq::export_queue_gauges(
                backend.clone(),
                vec![q.clone()],
                Duration::from_millis(20),
                stop.clone(),
            ));
            for _ in 0..500 {
                let s = backend.stats(&q).await.expect("stats");
                if s.ready + s.leased == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            tokio::time::sleep(Duration::from_millis(60)).await;
            stop.cancel();
            run.await.expect("join").expect("run");
            gauges.await.expect("join");
        });
    });
    let snap = snapshotter.snapshot().into_vec();
    let q = [("queue", "metered")];
    let counter = |name| match value(&snap, MetricKind::Counter, name, &q) {
        Some(DebugValue::Counter(n)) => *n,
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(counter(metric_names::CLAIMED), 10);
    assert_eq!(counter(metric_names::ACKED), 9);
    assert_eq!(counter(metric_names::DEAD), 1);
    // The store's own count, sampled by the gauge task.
    assert_eq!(counter(metric_names::COMPLETED), 9);
    match value(&snap, MetricKind::Gauge, metric_names::IN_FLIGHT, &q) {
        Some(DebugValue::Gauge(g)) => assert_eq!(g.into_inner(), 0.0),
        other => panic!("in flight: {other:?}"),
    }
    for histogram in [metric_names::DURATION, metric_names::WAIT] {
        match value(&snap, MetricKind::Histogram, histogram, &q) {
            Some(DebugValue::Histogram(h)) => assert_eq!(h.len(), 10, "{histogram}"),
            other => panic!("{histogram}: {other:?}"),
        }
    }
    match value(
        &snap,
        MetricKind::Gauge,
        metric_names::ITEMS,
        &[("queue", "metered"), ("state", "dead")],
    ) {
        Some(DebugValue::Gauge(g)) => assert_eq!(g.into_inner(), 1.0),
        other => panic!("items in dead: {other:?}"),
    }
}

#[test]
fn the_wait_runs_on_the_backends_clock_from_the_enqueue_across_attempts() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let clock = leaseq::ManualClock::new();
            let backend: Arc<dyn Backend> =
                Arc::new(MemoryBackend::with_clock(Arc::new(clock.clone())));
            let q = QueueName::new("waiting").expect("name");
            backend.push(&q, "x").await.expect("enqueue");
            // Ten seconds in the queue before the first claim.
            clock.advance(Duration::from_secs(10));
            let in_handler = clock.clone();
            let worker = Worker::builder(backend.clone(), "waiting")
                .lease_ttl(Duration::from_secs(600))
                .retry(leaseq::RetryPolicy::immediate())
                .build(handler_fn(move |job: Job, _ctx: JobContext| {
                    let clock = in_handler.clone();
                    async move {
                        if job.attempts == 1 {
                            // The first attempt takes twenty seconds, then fails.
                            clock.advance(Duration::from_secs(20));
                            return Err(std::io::Error::other("try again"));
                        }
                        Ok(())
                    }
                }))
                .expect("worker");
            let stop = CancellationToken::new();
            let run = tokio::spawn(worker.run(stop.clone()));
            for _ in 0..500 {
                if backend.stats(&q).await.expect("stats").total() == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            stop.cancel();
            run.await.expect("join").expect("run");
        });
    });
    let snap = snapshotter.snapshot().into_vec();
    let waits = match value(
        &snap,
        MetricKind::Histogram,
        metric_names::WAIT,
        &[("queue", "waiting")],
    ) {
        Some(DebugValue::Histogram(h)) => {
            let mut w: Vec<f64> = h.iter().map(|v| v.into_inner()).collect();
            w.sort_by(f64::total_cmp);
            w
        }
        other => panic!("wait: {other:?}"),
    };
    assert_eq!(waits.len(), 2, "one sample per handler start: {waits:?}");
    // Read on the backend's (manual) clock: real time is far shorter.
    assert!(waits[0] >= 10.0, "first start waited {waits:?}");
    // The second start counts from the enqueue, through the first attempt.
    assert!(waits[1] >= 30.0, "second start waited {waits:?}");
}

/// Tells the test when a listing starts, and holds it until the test lets
/// it run: the gauge task lists once per tick, so the start of one tick's
/// listing means the previous tick's samples are all set.
#[derive(Debug)]
struct TickGate {
    inner: Arc<dyn Backend>,
    started: mpsc::UnboundedSender<()>,
    go: Arc<Semaphore>,
}

#[async_trait]
impl LayeredBackend for TickGate {
    type Inner = Arc<dyn Backend>;
    fn inner(&self) -> &Arc<dyn Backend> {
        &self.inner
    }
    async fn queues(&self) -> leaseq::Result<Vec<QueueName>> {
        let _ = self.started.send(());
        if let Ok(permit) = self.go.acquire().await {
            permit.forget();
        }
        self.inner.queues().await
    }
}

#[test]
fn the_gauge_task_samples_every_listed_queue_and_zeroes_the_ones_gone() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let memory: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
            let (started_tx, mut started) = mpsc::unbounded_channel();
            let go = Arc::new(Semaphore::new(0));
            let backend: Arc<dyn Backend> = Arc::new(TickGate {
                inner: memory.clone(),
                started: started_tx,
                go: go.clone(),
            });
            let (kept, dropped) = (
                QueueName::new("kept").expect("name"),
                QueueName::new("dropped").expect("name"),
            );
            memory.push(&kept, "a").await.expect("enqueue");
            memory.push(&kept, "b").await.expect("enqueue");
            memory.push(&dropped, "c").await.expect("enqueue");
            let stop = CancellationToken::new();
            let task = tokio::spawn(leaseq::export_queue_gauges(
                backend,
                Vec::new(),
                Duration::from_millis(10),
                stop.clone(),
            ));
            // Lets the held listing run; back once the next one starts.
            async fn next_tick(go: &Semaphore, started: &mut mpsc::UnboundedReceiver<()>) {
                go.add_permits(1);
                started.recv().await.expect("the gauge task lists again");
            }
            started.recv().await.expect("the first listing");
            // The first tick samples both queues (`dropped`: one Ready).
            next_tick(&go, &mut started).await;
            // Purged between two ticks: no longer listed at the second.
            memory
                .admin()
                .expect("admin")
                .purge(&dropped)
                .await
                .expect("purge");
            next_tick(&go, &mut started).await;
            stop.cancel();
            go.add_permits(1);
            task.await.expect("join");
        });
    });
    // One snapshot (reading a gauge resets it): the first tick set
    // `dropped`'s Ready gauge to 1, only the zeroing set it back.
    let snap = snapshotter.snapshot().into_vec();
    let gauge = |queue: &str, state: &str| match value(
        &snap,
        MetricKind::Gauge,
        metric_names::ITEMS,
        &[("queue", queue), ("state", state)],
    ) {
        Some(DebugValue::Gauge(g)) => Some(g.into_inner()),
        _ => None,
    };
    assert_eq!(gauge("kept", "ready"), Some(2.0));
    for state in ["ready", "scheduled", "leased", "dead"] {
        assert_eq!(gauge("dropped", state), Some(0.0), "dropped, {state}");
    }
}
