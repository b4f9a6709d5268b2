//! `leaseq history` (the kept finished items of a queue) and `leaseq
//! retention` (what a queue keeps): the backend's History group.

use std::time::Duration;

use clap::Args;
use leaseq::BackendExt as _;
use leaseq::{Ending, Finished, Keep, Retention, Timestamp};
use serde_json::{json, Value};

use super::admin::open;
use super::show::{self, Output};
use super::{CliError, Target};

#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// The queue's name.
    queue: String,
    /// Only items that ended this way: `completed` or `cancelled`.
    #[arg(long)]
    ending: Option<Ending>,
    /// The most items to list, newest first.
    #[arg(long, default_value_t = 100)]
    limit: usize,
    #[command(flatten)]
    out: Output,
}

#[derive(Debug, Args)]
pub(crate) struct RetentionArgs {
    /// The queue's name.
    queue: String,
    /// Keep completed items this many seconds after they finish.
    #[arg(long, value_name = "SECONDS")]
    completed_secs: Option<u64>,
    /// Keep at most this many completed items (the newest).
    #[arg(long, value_name = "N")]
    completed_count: Option<u64>,
    /// Keep cancelled items this many seconds after they end.
    #[arg(long, value_name = "SECONDS")]
    cancelled_secs: Option<u64>,
    /// Keep at most this many cancelled items (the newest).
    #[arg(long, value_name = "N")]
    cancelled_count: Option<u64>,
    /// Remove dead letters this many seconds after they died.
    #[arg(long, value_name = "SECONDS")]
    dead_secs: Option<u64>,
    /// Keep at most this many dead letters (the newest).
    #[arg(long, value_name = "N")]
    dead_count: Option<u64>,
    /// Back to the default policy: nothing finished kept, dead letters
    /// kept until redriven or removed.
    #[arg(long, conflicts_with_all = ["completed_secs", "completed_count", "cancelled_secs", "cancelled_count", "dead_secs", "dead_count"])]
    off: bool,
    #[command(flatten)]
    out: Output,
}

/// The kept items, newest first: id, ending, when, attempts, result and
/// payload (shortened).
pub(crate) async fn history(url: &Target, args: HistoryArgs) -> Result<(), CliError> {
    let (backend, queue) = open(url, &args.queue).await?;
    let list = backend
        .history()?
        .finished(&queue, args.ending, args.limit)
        .await?;
    if args.out.json {
        show::print_json(&Value::Array(list.iter().map(finished_json).collect()));
        show::note_if_cut(list.len(), args.limit, None, "kept items");
        return Ok(());
    }
    if list.is_empty() {
        println!("(no kept items; see `leaseq retention {queue}`)");
        return Ok(());
    }
    let now = backend.now().await?;
    println!(
        "{:>10} {:<9} {:>12} {:>8}  {:<30} payload",
        "id", "ending", "finished", "attempts", "result"
    );
    for f in &list {
        println!(
            "{:>10} {:<9} {:>12} {:>8}  {:<30} {}",
            f.id.to_string(),
            f.ending.as_str(),
            show::relative(f.finished_at, now),
            f.attempts,
            show::shorten(&text(f.result.as_deref()), 30),
            show::shorten(&String::from_utf8_lossy(&f.payload), 40)
        );
    }
    show::note_if_cut(list.len(), args.limit, None, "kept items");
    Ok(())
}

/// Shows the policy, or sets it from the flags given (the others keep
/// their current value).
pub(crate) async fn retention(url: &Target, args: RetentionArgs) -> Result<(), CliError> {
    let (backend, queue) = open(url, &args.queue).await?;
    let history = backend.history()?;
    let current = history.retention(&queue).await?;
    let changes = [
        args.completed_secs,
        args.completed_count,
        args.cancelled_secs,
        args.cancelled_count,
        args.dead_secs,
        args.dead_count,
    ];
    let policy = if args.off {
        Some(Retention::default())
    } else if changes.iter().any(Option::is_some) {
        Some(Retention {
            completed: changed(current.completed, args.completed_secs, args.completed_count),
            cancelled: changed(current.cancelled, args.cancelled_secs, args.cancelled_count),
            dead: changed(current.dead, args.dead_secs, args.dead_count),
        })
    } else {
        None
    };
    let shown = match policy {
        Some(p) => {
            history.set_retention(&queue, p).await?;
            p
        }
        None => current,
    };
    if args.out.json {
        show::print_json(&json!({
            "queue": queue.as_str(),
            "completed": keep_json(shown.completed),
            "cancelled": keep_json(shown.cancelled),
            "dead": keep_json(shown.dead),
        }));
    } else {
        println!("{:<10} {}", "completed", describe(shown.completed));
        println!("{:<10} {}", "cancelled", describe(shown.cancelled));
        let dead = match shown.dead {
            Keep::FOREVER => "kept until redriven or removed".to_owned(),
            other => describe(other),
        };
        println!("{:<10} {dead}", "dead");
    }
    Ok(())
}

/// `keep` with a new age and/or count; a count given without an age (or
/// the other way) on a policy that kept nothing keeps no bound on the
/// other.
fn changed(keep: Keep, secs: Option<u64>, count: Option<u64>) -> Keep {
    if secs.is_none() && count.is_none() {
        return keep;
    }
    let base = if keep.keeps_any() {
        keep
    } else {
        Keep::FOREVER
    };
    Keep {
        max_age: secs.map(Duration::from_secs).or(base.max_age),
        max_count: count.or(base.max_count),
    }
}

fn describe(keep: Keep) -> String {
    if !keep.keeps_any() {
        return "not kept".into();
    }
    match (keep.max_age, keep.max_count) {
        (None, None) => "kept until purged".into(),
        (Some(age), None) => format!("kept {} s", age.as_secs()),
        (None, Some(n)) => format!("the newest {n} kept"),
        (Some(age), Some(n)) => format!("kept {} s, at most the newest {n}", age.as_secs()),
    }
}

fn keep_json(keep: Keep) -> Value {
    json!({
        "kept": keep.keeps_any(),
        "max_age_secs": keep.max_age.map(|d| d.as_secs()),
        "max_count": keep.max_count,
    })
}

/// A result or payload as text; not UTF-8 shows as its size.
fn text(bytes: Option<&[u8]>) -> String {
    match bytes {
        None => "-".into(),
        Some(b) => match std::str::from_utf8(b) {
            Ok(t) => t.to_owned(),
            Err(_) => format!("({} bytes, not UTF-8)", b.len()),
        },
    }
}

/// One kept item as JSON: times as RFC 3339 and epoch milliseconds, the
/// id as a string, the result as text when it is UTF-8.
pub(crate) fn finished_json(f: &Finished) -> Value {
    let (finished, finished_ms) = show::time_json(Some(f.finished_at));
    let (enqueued, enqueued_ms) = show::time_json(Some(f.enqueued_at));
    json!({
        "id": f.id.to_string(),
        "ending": f.ending.as_str(),
        "finished_at": finished,
        "finished_at_ms": finished_ms,
        "enqueued_at": enqueued,
        "enqueued_at_ms": enqueued_ms,
        "attempts": f.attempts,
        "result": f.result.as_deref().and_then(|r| std::str::from_utf8(r).ok()),
        "result_len": f.result.as_ref().map(|r| r.len()),
        "payload": String::from_utf8_lossy(&f.payload),
        "last_error": f.last_error,
    })
}

/// A kept item whole, a field per line (what `leaseq item` shows for an
/// item that has finished).
pub(crate) fn print_finished(queue: &str, f: &Finished, now: Timestamp, out: Output) {
    if out.json {
        let mut v = finished_json(f);
        v["queue"] = json!(queue);
        show::print_json(&v);
        return;
    }
    println!("{:<14} {}", "queue", queue);
    println!("{:<14} {}", "id", f.id);
    println!("{:<14} {}", "state", f.ending.as_str());
    println!("{:<14} {}", "finished", show::when(f.finished_at, now));
    println!("{:<14} {}", "enqueued", show::when(f.enqueued_at, now));
    println!("{:<14} {}", "attempts", f.attempts);
    println!("{:<14} {}", "result", text(f.result.as_deref()));
    if let Some(e) = &f.last_error {
        println!("{:<14} {e}", "last error");
    }
    println!("{:<14} {}", "payload", String::from_utf8_lossy(&f.payload));
}
