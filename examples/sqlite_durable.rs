//! Jobs in an SQLite file outlive the process that holds them: a producer
//! writes six jobs and exits; a worker process handles two and crashes in
//! the middle of the third (its lease still held); a new worker process
//! opens the file, gets the crashed job back when its lease runs out (with
//! the job the first worker had claimed to start next, whose lease ran out
//! too: it shows attempt 2 without ever having started), and finishes the
//! rest. The two jobs finished before the crash do not run
//! again: the crashing worker waits for their acks first. (A worker acks
//! in the background; a process killed between a job's end and its ack
//! runs that job again elsewhere: delivery is at-least-once.)
//!
//! ```text
//! cargo run -p leaseq --example sqlite_durable --features sqlite
//! ```
//!
//! The file is `$TMPDIR/leaseq-sqlite-example.db`, or `LEASEQ_EXAMPLE_DB`.
//! Each step is also a command of its own (`-- enqueue`, `-- work`,
//! `-- work --crash-after 2`), to stop and restart by hand.

use leaseq::BackendExt as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaseq::sqlite::{Durability, SqliteBackend, SqliteOptions};
use leaseq::{
    handler_fn, Backend, CancellationToken, Job, JobContext, NewItem, QueueName, Worker,
    WorkerMetrics,
};

type Error = Box<dyn std::error::Error>;

/// The leases the workers take: short, so that the crashed worker's job
/// comes back within seconds.
const LEASE: Duration = Duration::from_secs(2);

fn file() -> PathBuf {
    std::env::var_os("LEASEQ_EXAMPLE_DB")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("leaseq-sqlite-example.db"))
}

async fn open() -> leaseq::Result<SqliteBackend> {
    // `Durability::Full` (the default) also survives a power failure;
    // `Normal` survives any process crash, as here, with cheaper commits.
    let options = SqliteOptions::new().durability(Durability::Full);
    SqliteBackend::connect(&format!("sqlite://{}", file().display()), options).await
}

fn queue() -> leaseq::Result<QueueName> {
    QueueName::new("thumbnails")
}

/// A fresh queue with six jobs, written before this process exits.
async fn enqueue() -> Result<(), Error> {
    let backend = open().await?;
    let q = queue()?;
    backend.admin()?.purge(&q).await?;
    let jobs = (1..=6).map(|n| NewItem::new(format!("thumbnail {n}")).max_attempts(5));
    let ids = backend.enqueue(&q, jobs.collect()).await?;
    println!(
        "[producer {}] enqueued {} jobs",
        std::process::id(),
        ids.len()
    );
    backend.close().await;
    Ok(())
}

/// A worker on the file until the queue is empty, or, with `crash_after`,
/// until it starts the job after that many: it then waits for the acks of
/// the jobs it finished and exits in the middle of the job, the way a
/// killed process would (that job's lease still held).
async fn work(crash_after: Option<usize>) -> Result<(), Error> {
    let backend: Arc<dyn Backend> = Arc::new(open().await?);
    let q = queue()?;
    let me = std::process::id();
    let found = backend.stats(&q).await?;
    println!(
        "[worker {me}] opened the file: {} ready, {} leased by a process that is gone",
        found.ready, found.leased
    );
    let started = Arc::new(AtomicUsize::new(0));
    let shutdown = CancellationToken::new();
    let metrics = WorkerMetrics::default();
    let acks = metrics.clone();
    let worker = Worker::builder(backend.clone(), q.as_str())
        .concurrency(1)
        // One job per claim: at the crash only the job in hand and the one
        // claimed to follow it are leased.
        .prefetch(1)
        .metrics(metrics.clone())
        .lease_ttl(LEASE)
        .reap_interval(Some(Duration::from_millis(250)))
        .build(handler_fn(move |job: Job, _ctx: JobContext| {
            let n = started.fetch_add(1, Ordering::SeqCst);
            let acks = acks.clone();
            async move {
                let what = String::from_utf8_lossy(&job.payload).into_owned();
                if crash_after.is_some_and(|k| n >= k) {
                    // The earlier jobs' acks go out in the background: let
                    // them land, or those jobs would run again too.
                    while acks.snapshot().acked < n as u64 {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    println!(
                        "[worker {me}] crashing in the middle of {what} (#{})",
                        job.id
                    );
                    std::process::exit(3);
                }
                println!(
                    "[worker {me}] {what} (#{}, attempt {})",
                    job.id, job.attempts
                );
                Ok::<_, std::io::Error>(())
            }
        }))?;
    let running = tokio::spawn(worker.run(shutdown.clone()));
    while backend.stats(&q).await?.total() > 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    shutdown.cancel();
    running.await??;
    println!(
        "[worker {me}] queue empty; this process acked {}",
        metrics.snapshot().acked
    );
    Ok(())
}

/// Runs this program again as a separate process with `args`.
fn step(args: &[&str]) -> Result<std::process::ExitStatus, Error> {
    Ok(Command::new(std::env::current_exe()?).args(args).status()?)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = || -> Result<(), Error> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        match args.as_slice() {
            ["enqueue"] => rt.block_on(enqueue()),
            ["work"] => rt.block_on(work(None)),
            ["work", "--crash-after", k] => rt.block_on(work(Some(k.parse()?))),
            [] => {
                println!("file: {}", file().display());
                if !step(&["enqueue"])?.success() {
                    return Err("the producer failed".into());
                }
                let crashed = step(&["work", "--crash-after", "2"])?;
                println!("worker exited with {crashed}; starting a new one");
                if !step(&["work"])?.success() {
                    return Err("the second worker failed".into());
                }
                Ok(())
            }
            other => Err(format!(
                "unknown arguments {other:?}: expected nothing, `enqueue`, `work` or \
                 `work --crash-after N`"
            )
            .into()),
        }
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sqlite_durable: {e}");
            ExitCode::FAILURE
        }
    }
}
