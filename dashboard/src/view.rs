//! Items as the page shows them: ids as strings (JavaScript numbers lose
//! digits past 2^53), payloads as text or hex, cut to a preview.

use leaseq_core::{ItemInfo, ItemState, QueueName, QueueStats, WorkerEntry};
use serde::Serialize;

/// Payload bytes shown per item in a list.
pub const LIST_PREVIEW: usize = 256;
/// Payload bytes shown on an item's own page.
pub const ITEM_PREVIEW: usize = 64 * 1024;

/// One queue's row on the overview.
#[derive(Debug, Serialize)]
pub(crate) struct QueueView {
    name: String,
    ready: u64,
    scheduled: u64,
    leased: u64,
    dead: u64,
    total: u64,
    /// Claims get nothing until it is resumed.
    paused: bool,
}

impl QueueView {
    pub(crate) fn new(name: &QueueName, stats: &QueueStats) -> Self {
        Self {
            name: name.as_str().to_owned(),
            ready: stats.ready,
            scheduled: stats.scheduled,
            leased: stats.leased,
            dead: stats.dead,
            total: stats.total(),
            paused: stats.paused,
        }
    }
}

/// One item, with its payload cut to a preview.
#[derive(Debug, Serialize)]
pub(crate) struct ItemView {
    id: String,
    state: &'static str,
    priority: i32,
    attempts: u32,
    max_attempts: u32,
    dedup_key: Option<String>,
    /// When it was enqueued (ms since the epoch, the backend's clock);
    /// kept across retries and redrives.
    enqueued_at_ms: u64,
    /// Scheduled: due time; Leased: lease expiry (ms, the backend's clock).
    due_at_ms: Option<u64>,
    last_error: Option<String>,
    payload: PayloadView,
    /// Leased: what its handler recorded with `JobContext::progress`.
    progress: Option<PayloadView>,
    /// Leased: an operator asked to cancel it.
    cancel_requested: bool,
}

/// A payload the page can only show as text: UTF-8 as it is, anything
/// else as hex, never markup.
#[derive(Debug, Serialize)]
pub(crate) struct PayloadView {
    bytes: usize,
    encoding: &'static str,
    text: String,
    truncated: bool,
}

impl ItemView {
    pub(crate) fn new(item: &ItemInfo, preview: usize) -> Self {
        Self {
            id: item.id.to_string(),
            state: state_name(item.state),
            priority: item.priority,
            attempts: item.attempts,
            max_attempts: item.max_attempts,
            dedup_key: item.dedup_key.clone(),
            enqueued_at_ms: item.enqueued_at.as_millis(),
            due_at_ms: item.due_at.map(|t| t.as_millis()),
            last_error: item.last_error.clone(),
            payload: PayloadView::new(&item.payload, preview),
            progress: item.progress.as_ref().map(|p| PayloadView::new(p, preview)),
            cancel_requested: item.cancel_requested,
        }
    }
}

impl PayloadView {
    pub(crate) fn new(payload: &[u8], preview: usize) -> Self {
        let truncated = payload.len() > preview;
        let head = &payload[..payload.len().min(preview)];
        let (encoding, text) = match std::str::from_utf8(head) {
            Ok(text) => ("utf8", text.to_owned()),
            // A cut in the middle of a character is still text.
            Err(e) if truncated && e.error_len().is_none() => (
                "utf8",
                String::from_utf8_lossy(&head[..e.valid_up_to()]).into_owned(),
            ),
            Err(_) => ("hex", hex(head)),
        };
        Self {
            bytes: payload.len(),
            encoding,
            text,
            truncated,
        }
    }
}

/// One live worker, item ids as strings.
#[derive(Debug, Serialize)]
pub(crate) struct WorkerView {
    id: String,
    host: String,
    pid: u32,
    queue: String,
    concurrency: usize,
    started_at_ms: u64,
    expires_at_ms: u64,
    jobs: Vec<RunningJobView>,
}

/// One job a worker runs.
#[derive(Debug, Serialize)]
pub(crate) struct RunningJobView {
    id: String,
    attempt: u32,
    started_at_ms: u64,
}

impl WorkerView {
    pub(crate) fn new(w: &WorkerEntry) -> Self {
        Self {
            id: w.id.clone(),
            host: w.host.clone(),
            pid: w.pid,
            queue: w.queue.clone(),
            concurrency: w.concurrency,
            started_at_ms: w.started_at,
            expires_at_ms: w.expires_at,
            jobs: w
                .jobs
                .iter()
                .map(|j| RunningJobView {
                    id: j.id.to_string(),
                    attempt: j.attempt,
                    started_at_ms: j.started_at,
                })
                .collect(),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 3), |mut s, b| {
            if !s.is_empty() {
                s.push(' ');
            }
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The state's name in the API (`ready`, `scheduled`, `leased`, `dead`).
pub(crate) fn state_name(state: ItemState) -> &'static str {
    match state {
        ItemState::Ready => "ready",
        ItemState::Scheduled => "scheduled",
        ItemState::Leased => "leased",
        ItemState::Dead => "dead",
    }
}

/// The state a name in the API stands for.
pub(crate) fn parse_state(name: &str) -> Option<ItemState> {
    [
        ItemState::Ready,
        ItemState::Scheduled,
        ItemState::Leased,
        ItemState::Dead,
    ]
    .into_iter()
    .find(|s| state_name(*s) == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_stays_text_and_markup_is_not_interpreted_here() {
        let p = PayloadView::new(b"<script>alert(1)</script>", 256);
        assert_eq!(
            (p.encoding, p.text.as_str()),
            ("utf8", "<script>alert(1)</script>")
        );
        assert!(!p.truncated);
    }

    #[test]
    fn invalid_utf8_is_shown_as_hex() {
        let p = PayloadView::new(&[0xff, 0xfe, b'a'], 256);
        assert_eq!((p.encoding, p.text.as_str()), ("hex", "ff fe 61"));
    }

    #[test]
    fn long_payloads_are_cut_and_a_cut_character_is_dropped() {
        let payload = "é".repeat(200); // 400 bytes, 2 per character
        let p = PayloadView::new(payload.as_bytes(), 255);
        assert!(p.truncated);
        assert_eq!((p.encoding, p.bytes), ("utf8", 400));
        assert_eq!(p.text, "é".repeat(127));
    }

    #[test]
    fn every_state_name_parses_back() {
        for s in [
            ItemState::Ready,
            ItemState::Scheduled,
            ItemState::Leased,
            ItemState::Dead,
        ] {
            assert_eq!(parse_state(state_name(s)), Some(s));
        }
        assert_eq!(parse_state("gone"), None);
    }
}
