//! Admin commands against any backend URL.

use leaseq::BackendExt as _;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use leaseq::{Backend, ItemId, ItemState, NewItem, QueueName};

use super::show::{self, Output};
use super::{CliError, QueueArgs, Target};

#[derive(Debug, Args)]
pub(crate) struct EnqueueArgs {
    /// The queue's name.
    queue: String,
    /// One item per payload (text); negative numbers (e.g. `-5`) are
    /// payloads too.
    #[arg(required_unless_present = "file", allow_negative_numbers = true)]
    payloads: Vec<String>,
    /// One item whose payload is this file's bytes (`-`: standard input),
    /// for payloads too large or binary for the command line (at most the
    /// backend's payload limit, 1 MiB by default).
    #[arg(long, conflicts_with = "payloads")]
    file: Option<std::path::PathBuf>,
    /// Higher is claimed first.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    priority: i32,
    /// Not claimable until this many milliseconds from now.
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
    /// Claims allowed before an item goes Dead.
    #[arg(long, default_value_t = NewItem::DEFAULT_MAX_ATTEMPTS)]
    max_attempts: u32,
    /// A dedup key (only with a single payload).
    #[arg(long)]
    dedup_key: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct StatsArgs {
    /// The queue's name; without one, every queue that holds items.
    queue: Option<String>,
    /// Accept a queue that holds no items instead of reporting it unknown.
    #[arg(long, requires = "queue")]
    allow_empty: bool,
    #[command(flatten)]
    out: Output,
}

#[derive(Debug, Args)]
pub(crate) struct PeekArgs {
    #[command(flatten)]
    queue: QueueArgs,
    /// The state to show: ready, scheduled, leased or dead.
    #[arg(long, default_value = "ready")]
    state: String,
    /// The most items to show.
    #[arg(long, default_value_t = 20)]
    limit: usize,
    #[command(flatten)]
    out: Output,
}

#[derive(Debug, Args)]
pub(crate) struct ItemArgs {
    /// The queue's name.
    queue: String,
    /// The item (an id from `leaseq peek`, `dead list` or `enqueue`).
    #[arg(long)]
    id: ItemId,
    #[command(flatten)]
    out: Output,
}

#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    queue: QueueArgs,
    /// The most items to list or move.
    #[arg(long, default_value_t = 100)]
    limit: usize,
    #[command(flatten)]
    out: Output,
}

#[derive(Debug, Args)]
pub(crate) struct RedriveArgs {
    #[command(flatten)]
    queue: QueueArgs,
    /// The most items to move, oldest deaths first; without it, every item
    /// Dead when the command starts, in batches.
    #[arg(long, conflicts_with = "id")]
    limit: Option<usize>,
    /// Move only this Dead item (an id from `leaseq dead list`).
    #[arg(long)]
    id: Option<ItemId>,
}

#[derive(Debug, Args)]
#[group(skip)]
#[command(group = clap::ArgGroup::new("item").required(true).multiple(false))]
pub(crate) struct RemoveArgs {
    /// The queue's name.
    queue: String,
    /// The item to remove (an id from `leaseq peek` or `leaseq enqueue`).
    #[arg(long, group = "item")]
    id: Option<ItemId>,
    /// The same id as a positional argument, as earlier versions took it.
    #[arg(value_name = "ID", hide = true, group = "item")]
    positional_id: Option<ItemId>,
}

impl RemoveArgs {
    /// The item, however it was given (the group requires one).
    fn item(&self) -> Option<ItemId> {
        self.id.or(self.positional_id)
    }
}

#[derive(Debug, Args)]
pub(crate) struct PurgeArgs {
    #[command(flatten)]
    queue: QueueArgs,
    /// Do not ask for confirmation.
    #[arg(long, short)]
    yes: bool,
    /// Delete the queue entirely: also its dedup keys, limits and id
    /// counter, so the store keeps nothing of it (ids are still never
    /// reused). Works on an empty queue too.
    #[arg(long)]
    forget: bool,
}

/// Connects without touching the schema: admin commands read and change
/// items only, so a role without `CREATE` can run them.
pub(crate) async fn open(
    url: &Target,
    queue: &str,
) -> Result<(Arc<dyn Backend>, QueueName), CliError> {
    let queue = QueueName::new(queue)?;
    url.shared_only()?;
    let backend = url.connect(false).await?;
    Ok((backend, queue))
}

/// Opens the queue and checks that it holds something (unless allowed not to).
pub(crate) async fn open_known(
    url: &Target,
    q: &QueueArgs,
) -> Result<(Arc<dyn Backend>, QueueName, leaseq::QueueStats), CliError> {
    let (backend, queue) = open(url, &q.queue).await?;
    let stats = backend.stats(&queue).await?;
    // A paused queue is known even when empty (its pause is stored), and
    // so is one that completed items (its count is).
    let completed = stats.completed.unwrap_or(0);
    if stats.total() == 0 && !stats.paused && completed == 0 && !q.allow_empty {
        return Err(CliError::UnknownQueue(queue.to_string()));
    }
    Ok((backend, queue, stats))
}

pub(crate) async fn stats(url: &Target, args: StatsArgs) -> Result<(), CliError> {
    let Some(queue) = args.queue else {
        return all_stats(url, args.out).await;
    };
    let q = QueueArgs {
        queue,
        allow_empty: args.allow_empty,
    };
    let (_, queue, stats) = open_known(url, &q).await?;
    if args.out.json {
        show::print_json(&show::stats_json(queue.as_str(), &stats));
        return Ok(());
    }
    println!("queue {queue}");
    if stats.paused {
        println!("paused: claims get nothing until `leaseq resume {queue}`");
    }
    println!("{:<10} {:>12}", "state", "items");
    for state in ItemState::ALL {
        println!("{:<10} {:>12}", state.as_str(), stats.get(state));
    }
    println!("{:<10} {:>12}", "total", stats.total());
    if let Some(n) = stats.completed {
        println!("{:<10} {:>12}  (since the queue was made)", "completed", n);
    }
    Ok(())
}

/// One line per queue that holds items (from `Backend::queues`), with its
/// counts per state, under a header. A queue emptied between the listing
/// and its stats shows zeros.
async fn all_stats(url: &Target, out: Output) -> Result<(), CliError> {
    url.shared_only()?;
    let backend = url.connect(false).await?;
    let queues = backend.queues().await?;
    if out.json {
        let mut all = Vec::with_capacity(queues.len());
        for queue in &queues {
            all.push(show::stats_json(
                queue.as_str(),
                &backend.stats(queue).await?,
            ));
        }
        show::print_json(&serde_json::Value::Array(all));
        return Ok(());
    }
    let width = queues
        .iter()
        .map(|q| q.as_str().len())
        .max()
        .unwrap_or(0)
        .max("queue".len());
    print!("{:<width$}", "queue");
    for state in ItemState::ALL {
        print!(" {:>10}", state.as_str());
    }
    println!(" {:>10}", "total");
    for queue in &queues {
        let stats = backend.stats(queue).await?;
        print!("{:<width$}", queue.as_str());
        for state in ItemState::ALL {
            print!(" {:>10}", stats.get(state));
        }
        let paused = if stats.paused { "  paused" } else { "" };
        println!(" {:>10}{paused}", stats.total());
    }
    if queues.is_empty() {
        println!("(no queues hold items)");
    }
    Ok(())
}

pub(crate) async fn enqueue(url: &Target, args: EnqueueArgs) -> Result<(), CliError> {
    if args.dedup_key.is_some() && args.payloads.len() > 1 {
        return Err(CliError::Usage("--dedup-key takes a single payload".into()));
    }
    let (backend, queue) = open(url, &args.queue).await?;
    let payloads: Vec<Vec<u8>> = match &args.file {
        Some(path) => vec![read_payload(path)?],
        None => args
            .payloads
            .iter()
            .map(|p| p.clone().into_bytes())
            .collect(),
    };
    let items = payloads
        .into_iter()
        .map(|p| {
            let item = NewItem::new(p)
                .priority(args.priority)
                .delay(Duration::from_millis(args.delay_ms))
                .max_attempts(args.max_attempts);
            match &args.dedup_key {
                Some(k) => item.dedup_key(k.clone()),
                None => item,
            }
        })
        .collect::<Vec<_>>();
    // In batches the backend accepts; each batch is written whole or not
    // at all, and the ids of the batches written are printed as they land.
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        let batch: Vec<NewItem> = items
            .by_ref()
            .take(leaseq::limits::MAX_ENQUEUE_BATCH)
            .collect();
        for e in backend.enqueue(&queue, batch).await? {
            if e.deduplicated {
                println!("{} (deduplicated: an unfinished item holds the key)", e.id);
            } else {
                println!("{}", e.id);
            }
        }
    }
    Ok(())
}

pub(crate) async fn peek(url: &Target, args: PeekArgs) -> Result<(), CliError> {
    let state: ItemState = args.state.parse()?;
    let (backend, queue, stats) = open_known(url, &args.queue).await?;
    let items = backend.peek(&queue, state, args.limit).await?;
    show::items(&items, backend.now().await?, args.out);
    let what = format!("{} items", state.as_str());
    show::note_if_cut(items.len(), args.limit, Some(stats.get(state)), &what);
    Ok(())
}

pub(crate) async fn dead_list(url: &Target, args: ListArgs) -> Result<(), CliError> {
    let (backend, queue, stats) = open_known(url, &args.queue).await?;
    let items = backend.peek(&queue, ItemState::Dead, args.limit).await?;
    show::items(&items, backend.now().await?, args.out);
    show::note_if_cut(items.len(), args.limit, Some(stats.dead), "dead items");
    Ok(())
}

/// `leaseq item QUEUE --id ID`: one item whole (exit code 3 when the queue
/// holds no such item).
pub(crate) async fn item(url: &Target, args: ItemArgs) -> Result<(), CliError> {
    let (backend, queue) = open(url, &args.queue).await?;
    match backend.item(&queue, args.id).await {
        Ok(info) => {
            show::item(queue.as_str(), &info, backend.now().await?, args.out);
            Ok(())
        }
        // Finished: the queue may keep it (the History group).
        Err(leaseq::Error::NotFound { .. }) if backend.history().is_ok() => {
            match backend.history()?.finished_item(&queue, args.id).await {
                Ok(f) => {
                    let now = backend.now().await?;
                    super::history::print_finished(queue.as_str(), &f, now, args.out);
                    Ok(())
                }
                Err(e) => Err(CliError::about_item(e, &queue, args.id)),
            }
        }
        Err(e) => Err(CliError::about_item(e, &queue, args.id)),
    }
}

pub(crate) async fn dead_redrive(url: &Target, args: RedriveArgs) -> Result<(), CliError> {
    let (backend, queue, stats) = open_known(url, &args.queue).await?;
    let Some(id) = args.id else {
        let moved = match args.limit {
            Some(limit) => backend.admin()?.redrive(&queue, limit).await?,
            None => redrive_all(backend.as_ref(), &queue, stats.dead).await?,
        };
        println!("redrove {moved} dead items of {queue} back to ready");
        return Ok(());
    };
    match backend.admin()?.redrive_item(&queue, id).await {
        Ok(true) => {
            println!("redrove item {id} of {queue} back to ready");
            Ok(())
        }
        Ok(false) => {
            // Only for the message: the refusal itself changed nothing.
            let state = backend
                .item(&queue, id)
                .await
                .ok()
                .map(|info| info.state.as_str().to_owned());
            Err(CliError::WrongState {
                queue: queue.to_string(),
                id: id.get(),
                wanted: "dead",
                state,
            })
        }
        Err(e) => Err(CliError::about_item(e, &queue, id)),
    }
}

/// Items one `redrive` call moves when no limit is given.
const REDRIVE_BATCH: u64 = 1_000;

/// Moves the `dead` items Dead at the start back to Ready, a batch per
/// call, oldest deaths first; items dying meanwhile do not keep it going.
/// Returns how many moved.
async fn redrive_all(backend: &dyn Backend, queue: &QueueName, dead: u64) -> Result<u64, CliError> {
    let mut moved = 0;
    while moved < dead {
        let batch = (dead - moved).min(REDRIVE_BATCH);
        let n = backend
            .admin()?
            .redrive(queue, usize::try_from(batch).unwrap_or(usize::MAX))
            .await?;
        moved += n;
        if n < batch {
            // Fewer Dead than counted: another process moved or removed some.
            break;
        }
    }
    Ok(moved)
}

pub(crate) async fn reap(url: &Target, q: QueueArgs) -> Result<(), CliError> {
    let (backend, queue, _) = open_known(url, &q).await?;
    let report = backend.reap(&queue).await?;
    println!(
        "requeued {}, dead {}, repaired {}",
        report.requeued,
        report.dead,
        report.repairs.len()
    );
    for repair in &report.repairs {
        println!("  repaired: {repair}");
    }
    Ok(())
}

pub(crate) async fn remove(url: &Target, args: RemoveArgs) -> Result<(), CliError> {
    let Some(id) = args.item() else {
        return Err(CliError::Usage(
            "name the item to remove with --id ID".to_owned(),
        ));
    };
    let (backend, queue) = open(url, &args.queue).await?;
    match backend.admin()?.remove_item(&queue, id).await {
        Ok(state) => {
            println!("removed item {id} of {queue} (it was {state})");
            Ok(())
        }
        Err(e) => Err(CliError::about_item(e, &queue, id)),
    }
}

pub(crate) async fn purge(url: &Target, args: PurgeArgs) -> Result<(), CliError> {
    if args.forget {
        return forget(url, args).await;
    }
    let (backend, queue, stats) = open_known(url, &args.queue).await?;
    let prompt = format!("purge all {} items of queue {queue}? [y/N] ", stats.total());
    if !args.yes && !confirm(prompt).await? {
        println!("nothing purged");
        return Ok(());
    }
    let n = backend.admin()?.purge(&queue).await?;
    println!("purged {n} items from {queue}");
    Ok(())
}

/// `purge --forget`: `delete_queue`, also of a queue with no items left
/// (its limits or held keys are what an operator wants gone then).
async fn forget(url: &Target, args: PurgeArgs) -> Result<(), CliError> {
    let (backend, queue) = open(url, &args.queue.queue).await?;
    if backend.groups().admin.is_none() {
        return Err(CliError::Usage(
            "this backend offers no operator actions (it cannot delete a queue)".into(),
        ));
    }
    let stats = backend.stats(&queue).await?;
    let prompt = format!(
        "delete queue {queue} with its {} items, dedup keys and limits? [y/N] ",
        stats.total()
    );
    if !args.yes && !confirm(prompt).await? {
        println!("nothing deleted");
        return Ok(());
    }
    let n = backend.admin()?.delete_queue(&queue).await?;
    println!("deleted queue {queue} and its {n} items");
    Ok(())
}

pub(crate) async fn migrate(url: &Target) -> Result<(), CliError> {
    url.shared_only()?;
    #[cfg(feature = "redis")]
    if let Ok(leaseq::BackendUrl::Redis(redis_url)) = leaseq::BackendUrl::parse(url.url()) {
        return migrate_redis(url, &redis_url).await;
    }
    url.connect(true).await?;
    println!("{}: schema created or already up to date", url.shown_url());
    Ok(())
}

/// Converts every queue in the registry of queues from key layout 1 (see
/// the `leaseq-redis` crate docs, "Upgrading").
#[cfg(feature = "redis")]
async fn migrate_redis(url: &Target, redis_url: &str) -> Result<(), CliError> {
    let mut options = leaseq::redis::RedisOptions::new(redis_url);
    if let Some(prefix) = url.namespace() {
        options = options.prefix(prefix);
    }
    let backend = leaseq::redis::RedisRsBackend::connect(options).await?;
    let done = backend.migrate_layout1_all().await?;
    for (queue, moved) in &done {
        if *moved > 0 {
            println!("{queue}: {moved} items converted to key layout 2");
        }
    }
    println!(
        "{}: key layout 2 up to date ({} queues registered)",
        url.shown_url(),
        done.len()
    );
    Ok(())
}

/// A file's bytes, or standard input's for `-`.
pub(crate) fn read_payload(path: &std::path::Path) -> Result<Vec<u8>, CliError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let read = if path.as_os_str() == "-" {
        std::io::stdin().lock().read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut bytes))
    };
    read.map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))?;
    Ok(bytes)
}

/// Asks on the terminal; the read runs on a blocking thread, so a signal
/// still stops the command while it waits.
async fn confirm(prompt: String) -> Result<bool, CliError> {
    tokio::task::spawn_blocking(move || confirm_blocking(&prompt))
        .await
        .map_err(|e| CliError::Usage(format!("cannot read the confirmation: {e}")))?
}

fn confirm_blocking(prompt: &str) -> Result<bool, CliError> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(CliError::Usage(
            "refusing to purge without --yes: there is no terminal to confirm on".into(),
        ));
    }
    let mut out = std::io::stdout();
    let _ = write!(out, "{prompt}");
    let _ = out.flush();
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .map_err(|e| CliError::Usage(format!("cannot read the confirmation: {e}")))?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes" | "YES"))
}
