//! `leaseq schedules list|add|remove|run`: periodic jobs stored in the
//! backend.

use leaseq::BackendExt as _;
use std::time::Duration;

use clap::{Args, Subcommand};
use leaseq::schedule::{Missed, Schedule, ScheduleName, Scheduler, StoredSchedule};
use leaseq::{CancellationToken, QueueName};

use super::{CliError, Target};

#[derive(Debug, Subcommand)]
pub(crate) enum SchedulesCommand {
    /// Lists the stored schedules: cadence, queue, revision, last tick and
    /// next run.
    List(super::show::Output),
    /// Stores a schedule (creates it, or changes the one of that name).
    Add(AddArgs),
    /// Removes a schedule; the items it enqueued stay.
    Remove(RemoveArgs),
    /// Runs a scheduler until interrupted (any number may run at once).
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub(crate) struct AddArgs {
    /// The schedule's name.
    name: String,
    /// The queue its items go to.
    queue: String,
    /// The payload of each item (text).
    #[arg(required_unless_present = "file")]
    payload: Option<String>,
    /// The payload is this file's bytes (`-`: standard input).
    #[arg(long, conflicts_with = "payload")]
    file: Option<std::path::PathBuf>,
    /// A cron expression: 5 fields, or 6 with seconds first (e.g.
    /// "30 7 * * MON-FRI").
    #[arg(
        long,
        required_unless_present = "every_ms",
        conflicts_with = "every_ms"
    )]
    cron: Option<String>,
    /// A fixed interval in milliseconds, on its multiples since the epoch.
    #[arg(long)]
    every_ms: Option<u64>,
    /// The time zone cron fields are read in (IANA name).
    #[arg(long, default_value = "UTC")]
    tz: String,
    /// What to do with ticks missed while no scheduler ran: skip or
    /// enqueue-latest.
    #[arg(long, default_value = "skip")]
    missed: String,
    /// The priority of each item.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    priority: i32,
    /// Claims allowed per item before it goes Dead.
    #[arg(long, default_value_t = leaseq::NewItem::DEFAULT_MAX_ATTEMPTS)]
    max_attempts: u32,
}

#[derive(Debug, Args)]
pub(crate) struct RemoveArgs {
    /// The schedule's name.
    name: String,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// How often to read the definitions again, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    reload_ms: u64,
}

pub(crate) async fn run(
    url: &Target,
    command: SchedulesCommand,
    shutdown: CancellationToken,
) -> Result<(), CliError> {
    url.shared_only()?;
    match command {
        SchedulesCommand::List(out) => super::interruptible(&shutdown, list(url, out)).await,
        SchedulesCommand::Add(args) => super::interruptible(&shutdown, add(url, args)).await,
        SchedulesCommand::Remove(args) => super::interruptible(&shutdown, remove(url, args)).await,
        SchedulesCommand::Run(args) => {
            let backend = url.connect(false).await?;
            let n = backend.schedule_store()?.schedules().await?.len();
            println!("scheduler running over {n} schedule(s); Ctrl-C stops it");
            Scheduler::new(backend)
                .reload_every(Duration::from_millis(args.reload_ms))
                .run(shutdown)
                .await?;
            Ok(())
        }
    }
}

/// How a stored schedule reads in the list.
fn cadence(s: &StoredSchedule) -> String {
    match Schedule::from_stored(s) {
        Ok(schedule) => format!(
            "{} {} missed={}",
            schedule.cadence(),
            schedule.tz_name(),
            schedule.missed_policy()
        ),
        Err(e) => format!("(unreadable: {e})"),
    }
}

/// The next tick after `now` of a stored schedule, if it reads.
fn next_run(s: &StoredSchedule, now: leaseq::Timestamp) -> Option<leaseq::Timestamp> {
    Schedule::from_stored(s).ok()?.next_tick(now)
}

async fn list(url: &Target, out: super::show::Output) -> Result<(), CliError> {
    use super::show::{print_json, relative, rfc3339};
    let backend = url.connect(false).await?;
    let all = backend.schedule_store()?.schedules().await?;
    let now = backend.now().await?;
    if out.json {
        let rows = all
            .iter()
            .map(|s| {
                let next = next_run(s, now);
                serde_json::json!({
                    "name": s.name.as_str(),
                    "queue": s.queue.as_str(),
                    "revision": s.revision,
                    "cadence": cadence(s),
                    "last_tick": s.last_tick.map(rfc3339),
                    "last_tick_ms": s.last_tick.map(|t| t.as_millis()),
                    "next_run": next.map(rfc3339),
                    "next_run_ms": next.map(|t| t.as_millis()),
                })
            })
            .collect();
        print_json(&serde_json::Value::Array(rows));
        return Ok(());
    }
    if all.is_empty() {
        println!("no schedules");
        return Ok(());
    }
    println!(
        "{:<24} {:<16} {:>4}  {:<38} {:<38} cadence",
        "name", "queue", "rev", "last tick", "next run"
    );
    let shown = |t: Option<leaseq::Timestamp>| {
        t.map_or_else(
            || "-".to_owned(),
            |t| format!("{} ({})", rfc3339(t), relative(t, now)),
        )
    };
    for s in &all {
        println!(
            "{:<24} {:<16} {:>4}  {:<38} {:<38} {}",
            s.name.as_str(),
            s.queue.as_str(),
            s.revision,
            shown(s.last_tick),
            shown(next_run(s, now)),
            cadence(s)
        );
    }
    Ok(())
}

async fn add(url: &Target, args: AddArgs) -> Result<(), CliError> {
    let queue = QueueName::new(&args.queue)?;
    let payload = match (&args.file, args.payload) {
        (Some(path), _) => super::admin::read_payload(path)?,
        (None, Some(p)) => p.into_bytes(),
        (None, None) => return Err(CliError::Usage("give a payload or --file".into())),
    };
    let schedule = match (&args.cron, args.every_ms) {
        (Some(expr), None) => Schedule::cron(&args.name, queue, expr, payload)?,
        (None, Some(ms)) => Schedule::every(&args.name, queue, Duration::from_millis(ms), payload)?,
        _ => return Err(CliError::Usage("give one of --cron and --every-ms".into())),
    };
    let missed: Missed = args.missed.parse()?;
    let schedule = schedule
        .time_zone(&args.tz)?
        .missed(missed)
        .priority(args.priority)
        .max_attempts(args.max_attempts);
    let backend = url.connect(false).await?;
    let stored = backend.schedule_store()?.put_schedule(&schedule).await?;
    println!(
        "schedule {} stored: revision {}, {}",
        stored.name,
        stored.revision,
        cadence(&stored)
    );
    Ok(())
}

async fn remove(url: &Target, args: RemoveArgs) -> Result<(), CliError> {
    let name = ScheduleName::new(&args.name)?;
    let backend = url.connect(false).await?;
    if backend.schedule_store()?.remove_schedule(&name).await? {
        println!("schedule {name} removed");
        Ok(())
    } else {
        Err(CliError::Usage(format!("no schedule named {name}")))
    }
}
