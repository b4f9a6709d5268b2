//! `leaseq events`: a queue's job events as they happen, one line each,
//! until interrupted or `--count` events were printed.

use clap::Args;
use leaseq::events::{EventKind, JobEvent};
use leaseq::{BackendExt as _, Error, Timestamp};
use serde_json::json;

use super::admin::open;
use super::show::{self, Output};
use super::{CliError, Target};

#[derive(Debug, Args)]
pub(crate) struct EventsArgs {
    /// The queue's name.
    queue: String,
    /// Stop after this many events (default: run until interrupted).
    #[arg(long)]
    count: Option<u64>,
    #[command(flatten)]
    out: Output,
}

/// Follows the queue's events. Events are at most once: a subscriber that
/// fell behind is told how many it missed and subscribes again.
pub(crate) async fn events(
    url: &Target,
    args: EventsArgs,
    shutdown: leaseq::CancellationToken,
) -> Result<(), CliError> {
    let (backend, queue) = super::interruptible(&shutdown, open(url, &args.queue)).await?;
    let events = backend.events()?;
    let mut stream = events.subscribe(&queue).await?;
    if !args.out.json {
        eprintln!(
            "following the events of {queue} on {} (Ctrl-C to stop)",
            url.shown_url()
        );
        // SQLite tells events only to the handles of the process that made
        // them: this command, a process of its own, hears no other's.
        if matches!(
            leaseq::BackendUrl::parse(url.url()),
            Ok(leaseq::BackendUrl::Sqlite(_))
        ) {
            eprintln!(
                "note: on SQLite only this process's own changes are told; \
                 other processes' work on the file does not show here"
            );
        }
    }
    let mut printed = 0u64;
    while args.count.is_none_or(|n| printed < n) {
        let next = tokio::select! {
            biased;
            () = shutdown.cancelled() => return Ok(()),
            next = stream.next() => next,
        };
        match next {
            Some(Ok(event)) => {
                // Stamped on arrival: the event itself carries no time.
                let now = backend.now().await.unwrap_or(Timestamp::from_millis(0));
                print(&event, now, args.out);
                printed += 1;
            }
            Some(Err(Error::Lagged { missed })) => {
                eprintln!("fell behind: {missed} events were missed; following on");
            }
            Some(Err(e)) => return Err(e.into()),
            None => return Err(CliError::Backend("the event stream ended".into())),
        }
    }
    Ok(())
}

fn print(event: &JobEvent, at: Timestamp, out: Output) {
    let detail = detail(&event.kind);
    if out.json {
        show::print_json(&json!({
            "id": event.id.get(),
            "event": event.kind.name(),
            "detail": detail,
            "received_at": show::rfc3339(at),
        }));
    } else {
        println!(
            "{}  {:>10}  {:<9}  {detail}",
            show::rfc3339(at),
            event.id,
            event.kind.name()
        );
    }
}

/// The kind's data as text: attempt, progress, result, reason.
fn detail(kind: &EventKind) -> String {
    let text = |b: &[u8]| match std::str::from_utf8(b) {
        Ok(t) => t.to_owned(),
        Err(_) => format!("({} bytes, not UTF-8)", b.len()),
    };
    match kind {
        EventKind::Started { attempt } => format!("attempt {attempt}"),
        EventKind::Progress(p) => text(p),
        EventKind::Completed {
            result: Some(r), ..
        } => format!("result {}", text(r)),
        EventKind::Completed {
            result_elided: true,
            ..
        } => "result too large for an event (see leaseq item)".into(),
        EventKind::Failed { error } | EventKind::Dead { error } => error.clone(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leaseq::Bytes;

    #[test]
    fn details_say_what_each_kind_carries() {
        assert_eq!(detail(&EventKind::Started { attempt: 2 }), "attempt 2");
        assert_eq!(
            detail(&EventKind::completed(Some(Bytes::from_static(b"ok")))),
            "result ok"
        );
        assert_eq!(detail(&EventKind::completed(None)), "");
        assert_eq!(detail(&EventKind::dead("boom")), "boom");
        assert_eq!(
            detail(&EventKind::Progress(Bytes::from_static(b"\xff"))),
            "(1 bytes, not UTF-8)"
        );
    }
}
