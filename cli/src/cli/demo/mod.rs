//! `leaseq demo`: producers, workers (a share of them crashing), several
//! reapers at once, then the verdict: every item acked or dead exactly once.

mod fleet;
mod report;
mod tally;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use leaseq::{ItemState, QueueName, WorkerMetrics};
use tokio::task::JoinSet;

use super::CliError;
use fleet::Ctx;
use tally::Tally;

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Items to enqueue.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    items: u64,
    /// Worker processes (each a `Worker` with its own reaper).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=1_000))]
    workers: u64,
    /// Handlers each worker runs at once.
    #[arg(long, default_value_t = 16, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    pub(crate) concurrency: usize,
    /// Items each claim asks for.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub(crate) prefetch: u32,
    /// Chance that a delivery crashes its worker: the worker is killed with
    /// every lease it holds (no ack, no release) and restarted.
    #[arg(long, default_value_t = 0.01, value_parser = parse_rate)]
    pub(crate) crash_rate: f64,
    /// Extra standalone reapers, on top of each worker's own.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(0..=100))]
    reapers: u64,
    /// Producers enqueueing at once.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=100))]
    producers: u64,
    /// Lease length in milliseconds (how long a crashed worker's items wait).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(10..=600_000))]
    lease_ms: u64,
    /// The longest the run may take, in seconds; unfinished items then
    /// count as lost and the verdict fails.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    duration: u64,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{v} is outside [0, 1): a share of deliveries, e.g. 0.01"
        ))
    }
}

pub(crate) async fn run(
    target: &super::Target,
    args: DemoArgs,
    shutdown: leaseq::CancellationToken,
) -> Result<(), CliError> {
    let url = target.shown_url();
    let backend = target.connect(true).await?;
    let stamp = leaseq::Timestamp::now_system().as_millis();
    let queue = QueueName::new(format!("leaseq-demo-{}-{stamp}", std::process::id()))?;
    let args = Arc::new(args);
    let ctx = Ctx {
        backend: backend.clone(),
        queue: queue.clone(),
        tally: Arc::new(Tally::default()),
        metrics: WorkerMetrics::default(),
        stop: leaseq::CancellationToken::new(),
        ttl: Duration::from_millis(args.lease_ms),
    };
    report::header(&url, &args, ctx.ttl);

    let started = Instant::now();
    let mut tasks = JoinSet::new();
    let per = args.items.div_ceil(args.producers);
    for p in 0..args.producers {
        let range = (p * per).min(args.items)..((p + 1) * per).min(args.items);
        tasks.spawn(fleet::produce(ctx.clone(), range, 500));
    }
    for _ in 0..args.workers {
        tasks.spawn(fleet::worker_slot(ctx.clone(), args.clone()));
    }
    let mut reapers = JoinSet::new();
    for _ in 0..args.reapers {
        reapers.spawn(fleet::reap(ctx.clone(), ctx.ttl / 5));
    }

    let bar = progress_bar(args.items, args.no_progress);
    let end = watch(&ctx, &args, &bar, &mut tasks, &shutdown).await;
    let finished = matches!(end, End::Drained);
    let elapsed = started.elapsed();
    bar.finish_and_clear();

    ctx.stop.cancel();
    let mut first_error = None;
    while let Some(res) = tasks.join_next().await {
        if let Ok(Err(e)) = res {
            first_error.get_or_insert(e);
        }
    }
    while reapers.join_next().await.is_some() {}

    // Peeks may be capped by a backend; the counts come from stats.
    let limit = args.items as usize;
    let ids = |items: Vec<leaseq::ItemInfo>| items.into_iter().map(|i| i.id);
    let dead: HashSet<_> = ids(backend.peek(&queue, ItemState::Dead, limit).await?).collect();
    let mut remaining = HashSet::new();
    for state in [ItemState::Ready, ItemState::Scheduled, ItemState::Leased] {
        remaining.extend(ids(backend.peek(&queue, state, limit).await?));
    }
    let stats = backend.stats(&queue).await?;
    let verdict = ctx.tally.verdict(&dead, &remaining, stats);
    // Nothing of the demo's queue stays in the store.
    if let Some(admin) = backend.groups().admin {
        if let Err(e) = admin.delete_queue(&queue).await {
            let e = leaseq::redact_secrets(&e.to_string());
            eprintln!("warning: could not delete the demo's queue {queue}: {e}");
        }
    }
    report::print(&ctx, &verdict, elapsed, end);

    if end == End::Interrupted {
        return Err(CliError::Interrupted(format!(
            "interrupted after {:.1} s: the verdict above is for the work done so far; queue {queue} was removed",
            elapsed.as_secs_f64()
        )));
    }
    if let Some(e) = first_error {
        return Err(CliError::from(e));
    }
    if !verdict.passed(args.items) {
        return Err(CliError::Verdict(if finished {
            "verdict FAILED: items were lost, duplicated or left behind".into()
        } else {
            format!(
                "verdict FAILED: not finished within --duration {}s",
                args.duration
            )
        }));
    }
    Ok(())
}

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// Every item enqueued and the queue holds nothing but Dead items.
    Drained,
    /// `--duration` passed first.
    TimedOut,
    /// Ctrl-C.
    Interrupted,
    /// A producer or worker failed.
    Failed,
}

/// Waits until every item was enqueued and the queue holds nothing but Dead
/// items, the time limit passes, Ctrl-C, or a task fails. True when the
/// queue drained.
async fn watch(
    ctx: &Ctx,
    args: &DemoArgs,
    bar: &ProgressBar,
    tasks: &mut JoinSet<leaseq::Result<()>>,
    shutdown: &leaseq::CancellationToken,
) -> End {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.duration);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tokio::time::sleep_until(deadline) => return End::TimedOut,
            _ = shutdown.cancelled() => {
                eprintln!("interrupted: stopping the workers");
                return End::Interrupted;
            }
            Some(Ok(Err(e))) = tasks.join_next(), if !tasks.is_empty() => {
                eprintln!("error: {e}");
                return End::Failed;
            }
        }
        let acked = ctx.tally.acked_unique();
        bar.set_position(acked);
        let rate = acked as f64 / started.elapsed().as_secs_f64().max(1e-3);
        let crashes = ctx.tally.count(&ctx.tally.crashes);
        bar.set_message(format!("{rate:.0}/s, {crashes} crashes"));
        if ctx.tally.enqueued_count() < args.items {
            continue;
        }
        if let Ok(stats) = ctx.backend.stats(&ctx.queue).await {
            if stats.total() == stats.dead {
                return End::Drained;
            }
        }
    }
}

fn progress_bar(len: u64, hidden: bool) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {elapsed_precise} {bar:30} {pos}/{len} acked {msg}")
    {
        bar.set_style(style);
    }
    bar
}
