//! `leaseq workers`: the live workers (the backend's WorkerRegistry group)
//! with the jobs each is running.

use clap::Args;
use leaseq::BackendExt as _;
use leaseq::{Timestamp, WorkerEntry};
use serde_json::{json, Value};

use super::show::{self, Output};
use super::{CliError, Target};

#[derive(Debug, Args)]
pub(crate) struct WorkersArgs {
    #[command(flatten)]
    out: Output,
}

/// One line per live worker, sorted by id, each followed by a line per job
/// it runs; times relative to the backend's clock.
pub(crate) async fn workers(url: &Target, args: WorkersArgs) -> Result<(), CliError> {
    url.shared_only()?;
    let backend = url.connect(false).await?;
    let workers = backend.registry()?.workers().await?;
    let now = backend.now().await?;
    if args.out.json {
        show::print_json(&Value::Array(workers.iter().map(worker_json).collect()));
        return Ok(());
    }
    if workers.is_empty() {
        println!("(no live workers)");
        return Ok(());
    }
    let id_width = column(&workers, "id", |w| &w.id);
    let host_width = column(&workers, "host", |w| &w.host);
    let queue_width = column(&workers, "queue", |w| &w.queue);
    println!(
        "{:<id_width$} {:<host_width$} {:>8} {:<queue_width$} {:>11} {:>7} {:>10}",
        "id", "host", "pid", "queue", "concurrency", "running", "expires"
    );
    for w in &workers {
        println!(
            "{:<id_width$} {:<host_width$} {:>8} {:<queue_width$} {:>11} {:>7} {:>10}",
            w.id,
            w.host,
            w.pid,
            w.queue,
            w.concurrency,
            w.jobs.len(),
            show::relative(Timestamp::from_millis(w.expires_at), now)
        );
        for job in &w.jobs {
            println!(
                "  item {} (attempt {}) started {}",
                job.id,
                job.attempt,
                show::relative(Timestamp::from_millis(job.started_at), now)
            );
        }
    }
    Ok(())
}

/// The widest of `header` and every worker's `field`.
fn column(workers: &[WorkerEntry], header: &str, field: impl Fn(&WorkerEntry) -> &str) -> usize {
    workers
        .iter()
        .map(|w| field(w).chars().count())
        .max()
        .unwrap_or(0)
        .max(header.len())
}

/// One worker as JSON: times as RFC 3339 and epoch milliseconds, item ids
/// as strings.
fn worker_json(w: &WorkerEntry) -> Value {
    let (started, started_ms) = show::time_json(Some(Timestamp::from_millis(w.started_at)));
    let (expires, expires_ms) = show::time_json(Some(Timestamp::from_millis(w.expires_at)));
    let jobs: Vec<Value> = w
        .jobs
        .iter()
        .map(|j| {
            let (at, at_ms) = show::time_json(Some(Timestamp::from_millis(j.started_at)));
            json!({
                "id": j.id.to_string(),
                "attempt": j.attempt,
                "started_at": at,
                "started_at_ms": at_ms,
            })
        })
        .collect();
    json!({
        "id": w.id,
        "host": w.host,
        "pid": w.pid,
        "queue": w.queue,
        "concurrency": w.concurrency,
        "started_at": started,
        "started_at_ms": started_ms,
        "expires_at": expires,
        "expires_at_ms": expires_ms,
        "jobs": jobs,
    })
}
