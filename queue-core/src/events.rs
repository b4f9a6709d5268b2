//! Job events: what happened to each job of a queue, as it happens
//! ([`crate::Events::subscribe`]).
//!
//! Delivery is at most once, to the streams that are subscribed when the
//! event happens: an event is lost when its stream lags or its connection
//! drops. The durable record of an ending is the history
//! ([`crate::History`]).
//!
//! A backend keeps one [`EventHub`] and publishes into it from wherever it
//! learns of an event: the operation itself in one process, or the
//! server's channel across processes (carrying [`JobEvent::to_wire`]).
//!
//! ```
//! use leaseq_core::events::{EventHub, EventKind, JobEvent};
//! use leaseq_core::ItemId;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let hub = EventHub::default();
//! let (mut stream, _first) = hub.subscribe("emails");
//! hub.publish("emails", || JobEvent::new(ItemId::new(7), EventKind::Enqueued));
//! let event = stream.next().await.unwrap().unwrap();
//! assert_eq!(event.id, ItemId::new(7));
//! # }
//! ```

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::broadcast;

use crate::{Error, ItemId, Result};

/// How many unread events a stream holds; past that, the oldest go, and
/// the stream tells of it with [`Error::Lagged`].
pub const EVENT_BUFFER: usize = 1024;

/// The largest result a [`EventKind::Completed`] event carries, in bytes:
/// a larger one is left out (`result_elided`), and the history has it.
/// Small enough for every backend's channel (a PostgreSQL `NOTIFY` payload
/// holds under 8,000 bytes).
pub const MAX_EVENT_RESULT: usize = 2048;

/// The largest error or progress text an event carries, in bytes; longer
/// ones are cut at a character boundary.
pub const MAX_EVENT_TEXT: usize = 1024;

/// How long a backend that sends events only for followed queues (a
/// "gate" per queue in the store) keeps a queue's gate after a subscriber
/// last set it: a subscriber that vanished costs the queue's writers for
/// this long at most.
pub const GATE_TTL: std::time::Duration = std::time::Duration::from_secs(30);

/// How often a subscriber sets its queue's gate again: well within
/// [`GATE_TTL`], so a renewal that fails once or twice loses nothing.
pub const GATE_REFRESH: std::time::Duration = std::time::Duration::from_secs(10);

const _: () = assert!(GATE_REFRESH.as_secs() * 2 < GATE_TTL.as_secs());

/// One thing that happened to one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEvent {
    /// The job.
    pub id: ItemId,
    /// What happened.
    pub kind: EventKind,
}

/// What happened to a job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventKind {
    /// Enqueued (ready at once or scheduled), by an enqueue, a schedule's
    /// tick, or an `enqueue_once` that made it.
    Enqueued,
    /// Claimed: attempt number `attempt` started.
    Started {
        /// Claims made, this one included.
        attempt: u32,
    },
    /// The running attempt recorded progress ([`crate::Control::progress`]).
    Progress(Bytes),
    /// Acked or completed ([`crate::History::complete`]).
    Completed {
        /// The handler's result, when it gave one of at most
        /// [`MAX_EVENT_RESULT`] bytes.
        result: Option<Bytes>,
        /// True when the result was larger than [`MAX_EVENT_RESULT`]: the
        /// history holds it when the queue keeps completed items.
        result_elided: bool,
    },
    /// The attempt ended and the job went back to wait for another: a
    /// `fail` with attempts left, or its lease expired and was reaped.
    Failed {
        /// The reason given (cut to [`MAX_EVENT_TEXT`]).
        error: String,
    },
    /// The lease was handed back without a failure (release, give back,
    /// snooze): the job waits for another claim.
    Released,
    /// Given up on: a `fail` on the last attempt, a dead-letter `fail`, or
    /// an expired lease on its last attempt. It is a dead letter now.
    Dead {
        /// The reason given (cut to [`MAX_EVENT_TEXT`]).
        error: String,
    },
    /// Cancelled ([`crate::Control::cancel`]): at once, or when its
    /// cancel-requested lease ended.
    Cancelled,
}

impl EventKind {
    /// The lowercase name, as on the wire and in the tool.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Enqueued => "enqueued",
            EventKind::Started { .. } => "started",
            EventKind::Progress(_) => "progress",
            EventKind::Completed { .. } => "completed",
            EventKind::Failed { .. } => "failed",
            EventKind::Released => "released",
            EventKind::Dead { .. } => "dead",
            EventKind::Cancelled => "cancelled",
        }
    }

    /// A completion with `result`, left out when it is larger than
    /// [`MAX_EVENT_RESULT`].
    pub fn completed(result: Option<Bytes>) -> Self {
        match result {
            Some(r) if r.len() > MAX_EVENT_RESULT => EventKind::Completed {
                result: None,
                result_elided: true,
            },
            result => EventKind::Completed {
                result,
                result_elided: false,
            },
        }
    }

    /// A failure with attempts left, its reason cut to [`MAX_EVENT_TEXT`].
    pub fn failed(error: &str) -> Self {
        EventKind::Failed {
            error: cut(error).to_owned(),
        }
    }

    /// A death, its reason cut to [`MAX_EVENT_TEXT`].
    pub fn dead(error: &str) -> Self {
        EventKind::Dead {
            error: cut(error).to_owned(),
        }
    }
}

/// `s` cut to at most [`MAX_EVENT_TEXT`] bytes, at a character boundary.
fn cut(s: &str) -> &str {
    if s.len() <= MAX_EVENT_TEXT {
        return s;
    }
    let mut end = MAX_EVENT_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl JobEvent {
    /// An event of job `id`.
    pub fn new(id: ItemId, kind: EventKind) -> Self {
        JobEvent { id, kind }
    }

    /// The event as one line of text, for a backend's channel: the kind's
    /// name, the id, and the kind's data (hex for bytes), separated by
    /// spaces. [`JobEvent::from_wire`] reads it back.
    pub fn to_wire(&self) -> String {
        let id = self.id.get();
        let name = self.kind.name();
        match &self.kind {
            EventKind::Enqueued | EventKind::Released | EventKind::Cancelled => {
                format!("{name} {id}")
            }
            EventKind::Started { attempt } => format!("{name} {id} {attempt}"),
            EventKind::Progress(p) => format!("{name} {id} {}", hex(p)),
            EventKind::Completed {
                result,
                result_elided,
            } => match result {
                Some(r) => format!("{name} {id} r {}", hex(r)),
                None if *result_elided => format!("{name} {id} elided"),
                None => format!("{name} {id} none"),
            },
            EventKind::Failed { error } | EventKind::Dead { error } => {
                format!("{name} {id} {}", hex(error.as_bytes()))
            }
        }
    }

    /// Reads [`JobEvent::to_wire`]'s text; [`Error::Corrupt`] for anything
    /// else.
    pub fn from_wire(text: &str) -> Result<Self> {
        let bad = || Error::Corrupt {
            what: format!("not a job event: {:?}", cut(text)),
        };
        let mut parts = text.split(' ');
        let name = parts.next().ok_or_else(bad)?;
        let id = parts
            .next()
            .and_then(|s| s.parse::<u64>().ok())
            .map(ItemId::new)
            .ok_or_else(bad)?;
        let data = parts.next();
        let bytes = |s: Option<&str>| s.and_then(unhex).ok_or_else(bad);
        let text = |s: Option<&str>| {
            bytes(s).and_then(|b| String::from_utf8(b.to_vec()).map_err(|_| bad()))
        };
        let bare = |kind: EventKind| if data.is_none() { Ok(kind) } else { Err(bad()) };
        let kind = match name {
            "enqueued" => bare(EventKind::Enqueued)?,
            "released" => bare(EventKind::Released)?,
            "cancelled" => bare(EventKind::Cancelled)?,
            "started" => EventKind::Started {
                attempt: data.and_then(|s| s.parse().ok()).ok_or_else(bad)?,
            },
            "progress" => EventKind::Progress(bytes(data)?),
            "completed" => match data {
                Some("r") => EventKind::Completed {
                    result: Some(bytes(parts.next())?),
                    result_elided: false,
                },
                Some("elided") => EventKind::Completed {
                    result: None,
                    result_elided: true,
                },
                Some("none") => EventKind::completed(None),
                _ => return Err(bad()),
            },
            "failed" => EventKind::Failed { error: text(data)? },
            "dead" => EventKind::Dead { error: text(data)? },
            _ => return Err(bad()),
        };
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(JobEvent { id, kind })
    }
}

impl fmt::Display for JobEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.id, self.kind.name())
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2 + 1);
    // An empty value is written as "-" so that the field is never empty.
    if bytes.is_empty() {
        out.push('-');
    }
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

fn unhex(s: &str) -> Option<Bytes> {
    if s == "-" {
        return Some(Bytes::new());
    }
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let raw = s.as_bytes();
    let mut out = Vec::with_capacity(raw.len() / 2);
    for pair in raw.chunks(2) {
        out.push(digit(pair[0])? << 4 | digit(pair[1])?);
    }
    Some(Bytes::from(out))
}

/// A subscription to one queue's job events ([`crate::Events::subscribe`]).
///
/// It holds at most [`EVENT_BUFFER`] unread events, so memory stays
/// bounded: a subscriber that falls further behind loses the oldest, gets
/// [`Error::Lagged`] with how many it lost, and then goes on with the
/// events still held, oldest first.
pub struct EventStream {
    receivers: Vec<Source>,
    /// Whatever feeds this stream from a server (a listening task); it
    /// stops when the last stream that needs it is dropped.
    _feed: Option<Arc<dyn Any + Send + Sync>>,
}

/// Maps a source's ids to the caller's; an id that does not map drops the
/// event.
type IdMap = Arc<dyn Fn(ItemId) -> Option<ItemId> + Send + Sync>;

/// One sender's receiver, with how its ids map.
struct Source {
    rx: broadcast::Receiver<JobEvent>,
    map: Option<IdMap>,
}

impl fmt::Debug for EventStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream")
            .field("sources", &self.receivers.len())
            .finish()
    }
}

impl EventStream {
    /// A stream that never yields: for tests and for a backend with no
    /// events to give.
    pub fn empty() -> Self {
        EventStream {
            receivers: Vec::new(),
            _feed: None,
        }
    }

    /// This stream, keeping `feed` alive as long as it lives: a backend's
    /// handle on the task that fills the hub from its server.
    #[must_use]
    pub fn with_feed(mut self, feed: Arc<dyn Any + Send + Sync>) -> Self {
        self._feed = Some(feed);
        self
    }

    /// This stream with each event's id put through `map`: for a layer
    /// whose ids are not the store's. An event whose id `map` refuses is
    /// dropped.
    #[must_use]
    pub fn map_ids(
        mut self,
        map: impl Fn(ItemId) -> Option<ItemId> + Send + Sync + 'static,
    ) -> Self {
        let map = Arc::new(map);
        for source in &mut self.receivers {
            let outer = map.clone();
            source.map = Some(match source.map.take() {
                Some(inner) => Arc::new(move |id| inner(id).and_then(|id| outer(id))),
                None => outer,
            });
        }
        self
    }

    /// One stream of the events of every stream in `streams`: for a layer
    /// that spreads a queue over several stores. Order holds within each
    /// source, not across them.
    pub fn merge(streams: impl IntoIterator<Item = EventStream>) -> Self {
        let mut feeds = Vec::new();
        let mut receivers = Vec::new();
        for s in streams {
            receivers.extend(s.receivers);
            feeds.extend(s._feed);
        }
        EventStream {
            receivers,
            _feed: Some(Arc::new(feeds)),
        }
    }

    /// The next event; `Some(Err(Error::Lagged))` when this stream fell
    /// more than [`EVENT_BUFFER`] events behind (the events it lost), after
    /// which it goes on with the oldest event it still holds; `None` when
    /// the backend is gone. Pends while no event comes.
    pub async fn next(&mut self) -> Option<Result<JobEvent>> {
        loop {
            if self.receivers.is_empty() {
                return std::future::pending().await;
            }
            let waits = self.receivers.iter_mut().map(|s| Box::pin(s.rx.recv()));
            let (got, at, _) = futures_util::future::select_all(waits).await;
            match got {
                Ok(mut event) => match &self.receivers[at].map {
                    None => return Some(Ok(event)),
                    Some(map) => {
                        if let Some(id) = map(event.id) {
                            event.id = id;
                            return Some(Ok(event));
                        }
                    }
                },
                // The receiver has moved to its oldest held event: the
                // stream goes on from there.
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    return Some(Err(Error::Lagged { missed }));
                }
                Err(broadcast::error::RecvError::Closed) => {
                    self.receivers.swap_remove(at);
                    if self.receivers.is_empty() {
                        return None;
                    }
                }
            }
        }
    }
}

/// The event senders of one backend, by queue (or any other key). Nothing
/// is built or sent for a key nobody subscribes to, and with no subscriber
/// at all, publishing costs one atomic load.
#[derive(Debug, Default)]
pub struct EventHub {
    keys: Mutex<HashMap<String, broadcast::Sender<JobEvent>>>,
    /// Keys with at least one sender made: the fast path's "nobody
    /// listens anywhere".
    watched: AtomicUsize,
}

impl EventHub {
    fn keys(&self) -> MutexGuard<'_, HashMap<String, broadcast::Sender<JobEvent>>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Subscribes to `key`'s events; true when nobody else watched `key`,
    /// so a backend that feeds the hub from a server starts its feed.
    pub fn subscribe(&self, key: &str) -> (EventStream, bool) {
        let mut keys = self.keys();
        if let Some(tx) = keys.get(key).filter(|tx| tx.receiver_count() > 0) {
            let rx = tx.subscribe();
            return (stream(rx), false);
        }
        keys.retain(|_, tx| tx.receiver_count() > 0);
        let (tx, rx) = broadcast::channel(EVENT_BUFFER);
        keys.insert(key.to_owned(), tx);
        self.watched.store(keys.len(), Ordering::Release);
        (stream(rx), true)
    }

    /// True when a stream of `key` is open in this process. A backend that
    /// asks before it writes (to choose what its write returns) keeps the
    /// fast path as [`EventHub::publish`] does: a key whose last stream
    /// went is forgotten here too.
    pub fn is_watched(&self, key: &str) -> bool {
        if self.watched.load(Ordering::Acquire) == 0 {
            return false;
        }
        self.live(&mut self.keys(), key).is_some()
    }

    /// Sends the event `make` builds to `key`'s streams; builds nothing
    /// when `key` has none.
    pub fn publish(&self, key: &str, make: impl FnOnce() -> JobEvent) {
        if self.watched.load(Ordering::Acquire) == 0 {
            return;
        }
        if let Some(tx) = self.live(&mut self.keys(), key) {
            // An error means the last stream just went: nobody to tell.
            let _ = tx.send(make());
        }
    }

    /// `key`'s sender while a stream of it is open. One whose last stream
    /// is gone is forgotten, so that once no key is left, publishing and
    /// asking are back to one atomic load.
    fn live<'k>(
        &self,
        keys: &'k mut HashMap<String, broadcast::Sender<JobEvent>>,
        key: &str,
    ) -> Option<&'k broadcast::Sender<JobEvent>> {
        if keys.get(key)?.receiver_count() == 0 {
            keys.remove(key);
            self.watched.store(keys.len(), Ordering::Release);
            return None;
        }
        keys.get(key)
    }
}

fn stream(rx: broadcast::Receiver<JobEvent>) -> EventStream {
    EventStream {
        receivers: vec![Source { rx, map: None }],
        _feed: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_kinds() -> Vec<EventKind> {
        vec![
            EventKind::Enqueued,
            EventKind::Started { attempt: 3 },
            EventKind::Progress(Bytes::from_static(b"50%")),
            EventKind::Progress(Bytes::new()),
            EventKind::completed(Some(Bytes::from_static(b"\x00\xffok"))),
            EventKind::completed(Some(Bytes::new())),
            EventKind::completed(None),
            EventKind::completed(Some(Bytes::from(vec![1; MAX_EVENT_RESULT + 1]))),
            EventKind::failed("boom: a b c"),
            EventKind::Released,
            EventKind::dead(""),
            EventKind::Cancelled,
        ]
    }

    #[test]
    fn every_kind_reads_back_from_the_wire() {
        for kind in all_kinds() {
            let event = JobEvent::new(ItemId::new(42), kind);
            let wire = event.to_wire();
            assert!(!wire.contains('\n') && !wire.contains('\0'), "{wire}");
            assert_eq!(JobEvent::from_wire(&wire).ok(), Some(event), "{wire}");
        }
    }

    #[test]
    fn bad_wire_text_is_corrupt() {
        for text in [
            "",
            "enqueued",
            "enqueued x",
            "started 1",
            "started 1 x",
            "progress 1 abc",
            "completed 1 maybe",
            "failed 1 zz",
            "failed 1 ff",
            "enqueued 1 extra",
            "exploded 1",
        ] {
            assert!(
                matches!(JobEvent::from_wire(text), Err(Error::Corrupt { .. })),
                "{text:?}"
            );
        }
    }

    #[test]
    fn large_results_and_long_texts_are_bounded() {
        let big = EventKind::completed(Some(Bytes::from(vec![7; MAX_EVENT_RESULT + 1])));
        assert_eq!(
            big,
            EventKind::Completed {
                result: None,
                result_elided: true
            }
        );
        let long = "é".repeat(MAX_EVENT_TEXT);
        let EventKind::Failed { error } = EventKind::failed(&long) else {
            panic!("not a failure");
        };
        assert!(error.len() <= MAX_EVENT_TEXT && long.starts_with(&error));
        let wire = JobEvent::new(ItemId::new(u64::MAX), big).to_wire();
        assert!(wire.len() < 8000);
    }

    #[tokio::test]
    async fn a_stream_that_falls_behind_is_told_and_goes_on() {
        let hub = EventHub::default();
        let (mut slow, first) = hub.subscribe("q");
        assert!(first);
        let (mut quick, first) = hub.subscribe("q");
        assert!(!first);
        for n in 0..(EVENT_BUFFER as u64 + 10) {
            hub.publish("q", || JobEvent::new(ItemId::new(n), EventKind::Enqueued));
            let got = quick.next().await.and_then(|r| r.ok()).map(|e| e.id.get());
            assert_eq!(got, Some(n));
        }
        assert!(matches!(
            slow.next().await,
            Some(Err(Error::Lagged { missed: 10 }))
        ));
        // The events it still holds, oldest first, then the new ones.
        let last = EVENT_BUFFER as u64 + 10;
        for n in 10..=last {
            if n == last {
                hub.publish("q", || JobEvent::new(ItemId::new(n), EventKind::Enqueued));
            }
            let got = slow.next().await.and_then(|r| r.ok()).map(|e| e.id.get());
            assert_eq!(got, Some(n));
        }
    }

    #[tokio::test]
    async fn nothing_is_built_for_a_queue_nobody_watches() {
        let hub = EventHub::default();
        hub.publish("q", || unreachable!("built with no subscriber"));
        let (stream, _) = hub.subscribe("other");
        hub.publish("q", || unreachable!("built for another queue's subscriber"));
        assert!(hub.is_watched("other") && !hub.is_watched("q"));
        drop(stream);
        assert!(!hub.is_watched("other"));
        hub.publish("other", || unreachable!("built after the last stream went"));
        assert_eq!(
            hub.watched.load(Ordering::Acquire),
            0,
            "the key is forgotten"
        );
        // Asking forgets a key whose last stream went, as publishing does.
        let (stream, _) = hub.subscribe("asked");
        drop(stream);
        assert!(!hub.is_watched("asked"));
        assert_eq!(
            hub.watched.load(Ordering::Acquire),
            0,
            "the key is forgotten"
        );
    }

    #[tokio::test]
    async fn merged_streams_yield_from_each_source() {
        let (a, b) = (EventHub::default(), EventHub::default());
        let b_stream = b
            .subscribe("q")
            .0
            .map_ids(|id| Some(ItemId::new(id.get() * 10)));
        let mut merged = EventStream::merge([a.subscribe("q").0, b_stream]);
        b.publish("q", || JobEvent::new(ItemId::new(2), EventKind::Cancelled));
        a.publish("q", || JobEvent::new(ItemId::new(1), EventKind::Released));
        let mut ids = vec![];
        for _ in 0..2 {
            ids.push(merged.next().await.and_then(|r| r.ok()).map(|e| e.id.get()));
        }
        ids.sort();
        assert_eq!(ids, vec![Some(1), Some(20)]);
    }
}
