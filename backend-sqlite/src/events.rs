//! The Events group on SQLite. SQLite cannot signal another process, so
//! events travel within one process: every handle on the same file in this
//! process shares one [`EventHub`] (a process-wide registry keyed by the
//! database, like the wake-ups of [`crate::notify`]), and a stream hears of
//! the changes made through any of them. A change made by another process
//! is not delivered.
//!
//! A write checks [`EventHub::is_watched`] for its queue before it runs
//! (one atomic load while no stream is open in the process). Unwatched, it
//! runs its usual statements: no lock, no returned column, nothing built.
//! (A schedule's fire learns its queue inside its transaction, so it takes
//! the order lock whether anyone watches or not; fires are rare.)
//! Watched, it takes its database's order lock, runs (where the plain
//! statement returns too little) a variant that returns what the events
//! need, and sends them after its commit, from what the statement returned,
//! before it lets the lock go: one job's events go out in the order their
//! changes committed, whichever handle in this process made them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use async_trait::async_trait;
use leaseq_core::events::{EventHub, EventKind, EventStream, JobEvent};
use leaseq_core::{Enqueued, Events, ItemId, Lease, QueueName, Result};

use crate::SqliteBackend;

/// One database's events in this process.
#[derive(Debug, Default)]
pub(crate) struct DbEvents {
    hub: EventHub,
    /// Held by a write on a watched queue from before its statement until
    /// its events are sent. Writes on one file take turns anyway (SQLite
    /// has one writer), so it costs them no concurrency.
    order: tokio::sync::Mutex<()>,
}

/// Every database's events in this process. Entries are weak: a database
/// no handle holds open anymore costs nothing.
type Registry = Mutex<HashMap<String, Weak<DbEvents>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Mutex::default)
}

impl DbEvents {
    /// The events of database `db` (a file's path, or an in-memory
    /// database's own name) in this process.
    pub(crate) fn of(db: &str) -> Arc<DbEvents> {
        let mut map = registry().lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(events) = map.get(db).and_then(Weak::upgrade) {
            return events;
        }
        map.retain(|_, w| w.strong_count() > 0);
        let events = Arc::new(DbEvents::default());
        map.insert(db.to_owned(), Arc::downgrade(&events));
        events
    }

    /// Before a write on `queues`: `None` when no stream of any of them is
    /// open in this process; otherwise the order lock, held by the
    /// [`Sender`] until it is dropped.
    pub(crate) async fn watch<'q>(
        &self,
        queues: impl IntoIterator<Item = &'q QueueName>,
    ) -> Option<Sender<'_>> {
        if !queues.into_iter().any(|q| self.hub.is_watched(q.as_str())) {
            return None;
        }
        Some(self.sender().await)
    }

    /// The order lock, for a write that learns its queue only inside its
    /// transaction (a schedule's fire): taken before the writer, as always,
    /// whether anyone watches or not. Its events are built only for a
    /// watched queue.
    pub(crate) async fn sender(&self) -> Sender<'_> {
        Sender {
            hub: &self.hub,
            _order: self.order.lock().await,
        }
    }
}

/// Sends the events of one write, holding its database's order lock.
pub(crate) struct Sender<'a> {
    hub: &'a EventHub,
    _order: tokio::sync::MutexGuard<'a, ()>,
}

impl Sender<'_> {
    /// Item `id` of `queue`: `kind`, to the streams of `queue`.
    pub(crate) fn send(&self, queue: &QueueName, id: ItemId, kind: EventKind) {
        self.hub.publish(queue.as_str(), || JobEvent::new(id, kind));
    }

    /// The items an enqueue made (not those it deduplicated).
    pub(crate) fn enqueued(&self, queue: &QueueName, results: &[Enqueued]) {
        for e in results.iter().filter(|e| !e.deduplicated) {
            self.send(queue, e.id, EventKind::Enqueued);
        }
    }

    /// The leases a claim handed out.
    pub(crate) fn started(&self, leases: &[Lease]) {
        for l in leases {
            let attempt = l.attempts;
            self.send(&l.key.queue, l.key.id, EventKind::Started { attempt });
        }
    }

    /// A lease ended by an ack or a complete (with `result`): Completed,
    /// or Cancelled when a cancel was requested.
    pub(crate) fn acked(
        &self,
        queue: &QueueName,
        id: ItemId,
        cancelled: bool,
        result: Option<leaseq_core::Bytes>,
    ) {
        let kind = if cancelled {
            EventKind::Cancelled
        } else {
            EventKind::completed(result)
        };
        self.send(queue, id, kind);
    }
}

/// In-process only (see the module docs): a stream hears of the changes
/// made through any handle on the same file in this process.
#[async_trait]
impl Events for SqliteBackend {
    async fn subscribe(&self, queue: &QueueName) -> Result<EventStream> {
        Ok(self.inner.events.hub.subscribe(queue.as_str()).0)
    }
}
