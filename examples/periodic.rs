//! Periodic jobs: a schedule stored in the backend, two schedulers racing
//! for every tick (as two processes would), and a worker with a job
//! timeout. Each tick runs once; a unique-for key keeps a follow-up job
//! from being enqueued twice within a minute, even after it was acked.
//!
//! `cargo run -p leaseq --example periodic --features cron`

use leaseq::BackendExt as _;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaseq::schedule::{Missed, Schedule, Scheduler};
use leaseq::{
    handler_fn, Backend, CancellationToken, Job, JobContext, MemoryBackend, NewItem, QueueName,
    Worker,
};

#[tokio::main]
async fn main() -> leaseq::Result<()> {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let queue = QueueName::new("heartbeats")?;

    // Every 500 ms; after an outage, one run for the latest missed tick.
    // Every process may put its schedules at start: an unchanged put
    // changes nothing.
    let schedule = Schedule::every(
        "heartbeat",
        queue.clone(),
        Duration::from_millis(500),
        "beat",
    )?
    .missed(Missed::EnqueueLatest);
    let stored = backend.schedule_store()?.put_schedule(&schedule).await?;
    println!(
        "schedule {} stored at revision {}",
        stored.name, stored.revision
    );

    // A cron schedule reads its fields in its own time zone.
    let report = Schedule::cron(
        "weekday-report",
        queue.clone(),
        "30 7 * * MON-FRI",
        "report",
    )?
    .time_zone("Europe/Berlin")?;
    let now = backend.now().await?;
    if let Some(next) = report.next_tick(now) {
        println!(
            "the weekday report would next run in {} min",
            next.saturating_since(now).as_secs() / 60
        );
    }

    // Two schedulers over one backend: the backend's atomic fire makes
    // each tick enqueue one item, whichever gets there first.
    let stop = CancellationToken::new();
    let schedulers: Vec<_> = (0..2)
        .map(|_| tokio::spawn(Scheduler::new(backend.clone()).run(stop.clone())))
        .collect();

    // The worker: handlers running past 2 s are cancelled and retried.
    let runs: Arc<Mutex<BTreeMap<String, u32>>> = Arc::default();
    let seen = runs.clone();
    let follow_ups = backend.clone();
    let worker = Worker::builder(backend.clone(), queue.as_str())
        .concurrency(4)
        .job_timeout(Duration::from_secs(2))
        .build(handler_fn(move |job: Job, _ctx: JobContext| {
            let (seen, b) = (seen.clone(), follow_ups.clone());
            async move {
                let text = String::from_utf8_lossy(&job.payload).into_owned();
                if let Ok(mut runs) = seen.lock() {
                    *runs.entry(text.clone()).or_default() += 1;
                }
                if text == "beat" {
                    // One cleanup per minute at most, however many beats
                    // ask: the key stays held for a minute after the
                    // cleanup job was acked.
                    let item = NewItem::new("cleanup")
                        .dedup_key("cleanup")
                        .unique_for(Duration::from_secs(60));
                    b.enqueue(&job.queue, vec![item]).await?;
                }
                Ok::<_, leaseq::Error>(())
            }
        }))?;
    let worker = tokio::spawn(worker.run(stop.clone()));

    tokio::time::sleep(Duration::from_millis(2_600)).await;
    stop.cancel();
    for s in schedulers {
        s.await
            .map_err(|e| leaseq::Error::outcome_unknown("a scheduler task", e))??;
    }
    worker
        .await
        .map_err(|e| leaseq::Error::outcome_unknown("the worker task", e))??;

    let last = backend
        .schedule_store()?
        .schedules()
        .await?
        .into_iter()
        .find(|s| s.name == *schedule.name())
        .and_then(|s| s.last_tick);
    let runs = runs.lock().map(|r| r.clone()).unwrap_or_default();
    println!("jobs run: {runs:?}: one beat per tick, one cleanup (unique for a minute)");
    println!("last tick fired: {last:?}");
    Ok(())
}
