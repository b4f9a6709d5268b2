//! `leaseq cancel`, `pause`, `resume` and `run-now`: control of running
//! and waiting work (the backend's Control group).

use clap::Args;
use leaseq::BackendExt as _;
use leaseq::{Backend, Cancelled, ItemId, ItemState, QueueName};

use super::admin::{open, open_known};
use super::{CliError, QueueArgs, Target};

#[derive(Debug, Args)]
pub(crate) struct CancelArgs {
    /// The queue's name.
    queue: String,
    /// The item to cancel (an id from `leaseq peek` or `leaseq enqueue`).
    #[arg(long)]
    id: ItemId,
}

#[derive(Debug, Args)]
pub(crate) struct PauseArgs {
    /// The queue's name.
    queue: String,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").required(true))]
pub(crate) struct RunNowArgs {
    #[command(flatten)]
    queue: QueueArgs,
    /// Move only this Scheduled item (an id from `leaseq peek --state
    /// scheduled`).
    #[arg(long, group = "which")]
    id: Option<ItemId>,
    /// Move every item Scheduled when the command starts, earliest due
    /// first, in batches.
    #[arg(long, group = "which")]
    all: bool,
}

/// `leaseq cancel QUEUE --id ID`: says whether the item ended at once or
/// its worker was asked to stop it (exit code 3 when the queue holds no
/// such item).
pub(crate) async fn cancel(url: &Target, args: CancelArgs) -> Result<(), CliError> {
    let (backend, queue) = open(url, &args.queue).await?;
    let id = args.id;
    match backend.control()?.cancel(&queue, id).await {
        Ok(Cancelled::Now { was }) => {
            println!("cancelled item {id} of {queue} now (it was {was})");
        }
        Ok(Cancelled::Requested) => println!(
            "cancel requested for item {id} of {queue}: it is leased; its worker stops the \
             handler, and the item ends cancelled when the lease ends"
        ),
        // A future kind of answer: the backend did cancel.
        Ok(other) => println!("cancelled item {id} of {queue} ({other:?})"),
        Err(e) => return Err(CliError::about_item(e, &queue, id)),
    }
    Ok(())
}

/// `leaseq pause QUEUE`.
pub(crate) async fn pause(url: &Target, args: PauseArgs) -> Result<(), CliError> {
    let (backend, queue) = open(url, &args.queue).await?;
    backend.control()?.pause(&queue).await?;
    println!(
        "paused {queue}: claims get nothing until `leaseq resume {queue}`; enqueues go on \
         and jobs already running finish"
    );
    Ok(())
}

/// `leaseq resume QUEUE`.
pub(crate) async fn resume(url: &Target, args: PauseArgs) -> Result<(), CliError> {
    let (backend, queue) = open(url, &args.queue).await?;
    backend.control()?.resume(&queue).await?;
    println!("resumed {queue}: workers claim its items again");
    Ok(())
}

/// `leaseq run-now QUEUE --id ID | --all`: Scheduled items to Ready now
/// (exit code 3 when the queue holds no such item, 4 when it is not
/// Scheduled).
pub(crate) async fn run_now(url: &Target, args: RunNowArgs) -> Result<(), CliError> {
    let (backend, queue, stats) = open_known(url, &args.queue).await?;
    let Some(id) = args.id else {
        let moved = run_all_now(backend.as_ref(), &queue, stats.scheduled).await?;
        println!("moved {moved} scheduled items of {queue} to ready");
        return Ok(());
    };
    match backend.control()?.run_now(&queue, id).await {
        Ok(true) => {
            println!("moved item {id} of {queue} to ready");
            Ok(())
        }
        Ok(false) => Err(CliError::WrongState {
            queue: queue.to_string(),
            id: id.get(),
            wanted: "scheduled",
            state: state_now(backend.as_ref(), &queue, id).await,
        }),
        Err(e) => Err(CliError::about_item(e, &queue, id)),
    }
}

/// Only for a refusal's message: the item's state now, a due Scheduled
/// item read as the Ready one it is.
async fn state_now(backend: &dyn Backend, queue: &QueueName, id: ItemId) -> Option<String> {
    let info = backend.item(queue, id).await.ok()?;
    let now = backend.now().await.ok()?;
    let due = info.state == ItemState::Scheduled && info.due_at.is_none_or(|t| t <= now);
    Some(if due {
        "ready (due already)".to_owned()
    } else {
        info.state.as_str().to_owned()
    })
}

/// Items one `run_all_now` call moves.
const RUN_NOW_BATCH: usize = 1_000;

/// Moves Scheduled items to Ready, a batch per call, until a call moves
/// none or as many moved as were Scheduled at the start (`scheduled`):
/// retries a busy queue schedules meanwhile do not keep it going.
async fn run_all_now(
    backend: &dyn Backend,
    queue: &QueueName,
    scheduled: u64,
) -> Result<u64, CliError> {
    let mut moved = 0;
    while moved < scheduled {
        let n = backend.control()?.run_all_now(queue, RUN_NOW_BATCH).await?;
        if n == 0 {
            break;
        }
        moved += n;
    }
    Ok(moved)
}
