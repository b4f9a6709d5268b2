//! `leaseq limits set|show|clear`: a queue's global limits, stored in the
//! backend so every worker on every machine obeys them.

use clap::{Args, Subcommand};
use leaseq::BackendExt as _;
use leaseq::{QueueLimits, QueueName, Rate};

use super::{CliError, Target};

#[derive(Debug, Subcommand)]
pub(crate) enum LimitsCommand {
    /// Sets a queue's limits; a limit not named keeps its value.
    Set(SetArgs),
    /// Shows a queue's limits.
    Show(ShowArgs),
    /// Removes both limits of a queue.
    Clear(NameArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The queue's name.
    queue: String,
    #[command(flatten)]
    out: super::show::Output,
}

#[derive(Debug, Args)]
pub(crate) struct NameArgs {
    /// The queue's name.
    queue: String,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("change").required(true).multiple(true))]
pub(crate) struct SetArgs {
    /// The queue's name.
    queue: String,
    /// At most this many items Leased at once, over every worker.
    #[arg(long, group = "change", conflicts_with = "no_concurrency")]
    concurrency: Option<u32>,
    /// At most N claims per window of the backend's clock: N/WINDOW, e.g.
    /// 5/1s, 100/250ms, 60/1m.
    #[arg(long, group = "change", conflicts_with = "no_rate")]
    rate: Option<Rate>,
    /// Removes the concurrency limit.
    #[arg(long, group = "change")]
    no_concurrency: bool,
    /// Removes the rate limit.
    #[arg(long, group = "change")]
    no_rate: bool,
}

/// Connects for a limits command (never migrates: see `leaseq migrate`).
async fn open(
    url: &Target,
    queue: &str,
) -> Result<(std::sync::Arc<dyn leaseq::Backend>, QueueName), CliError> {
    let queue = QueueName::new(queue)?;
    url.shared_only()?;
    Ok((url.connect(false).await?, queue))
}

fn print(queue: &QueueName, limits: &QueueLimits) {
    println!("queue {queue}");
    let concurrency = limits
        .concurrency
        .map_or_else(|| "none".to_owned(), |k| format!("{k} leased at once"));
    let rate = limits.rate.map_or_else(
        || "none".to_owned(),
        |r| format!("{r} ({} claims per {:?} window)", r.claims(), r.per()),
    );
    println!("{:<12} {concurrency}", "concurrency");
    println!("{:<12} {rate}", "rate");
}

pub(crate) async fn run(url: &Target, command: LimitsCommand) -> Result<(), CliError> {
    match command {
        LimitsCommand::Show(args) => {
            let (backend, queue) = open(url, &args.queue).await?;
            let limits = backend.throttles()?.queue_limits(&queue).await?;
            if args.out.json {
                super::show::print_json(&serde_json::json!({
                    "queue": queue.as_str(),
                    "concurrency": limits.concurrency,
                    "rate": limits.rate.map(|r| serde_json::json!({
                        "claims": r.claims(),
                        "per_ms": u64::try_from(r.per().as_millis()).unwrap_or(u64::MAX),
                    })),
                }));
            } else {
                print(&queue, &limits);
            }
        }
        LimitsCommand::Clear(args) => {
            let (backend, queue) = open(url, &args.queue).await?;
            backend
                .throttles()?
                .set_queue_limits(&queue, QueueLimits::NONE)
                .await?;
            print(&queue, &QueueLimits::NONE);
        }
        LimitsCommand::Set(args) => {
            let (backend, queue) = open(url, &args.queue).await?;
            // Read, change what was named, write: two limits commands on
            // one queue at once may each undo the other's change.
            let mut limits = backend.throttles()?.queue_limits(&queue).await?;
            if let Some(k) = args.concurrency {
                limits.concurrency = Some(k);
            }
            if args.no_concurrency {
                limits.concurrency = None;
            }
            if let Some(r) = args.rate {
                limits.rate = Some(r);
            }
            if args.no_rate {
                limits.rate = None;
            }
            backend
                .throttles()?
                .set_queue_limits(&queue, limits)
                .await?;
            print(&queue, &backend.throttles()?.queue_limits(&queue).await?);
        }
    }
    Ok(())
}
