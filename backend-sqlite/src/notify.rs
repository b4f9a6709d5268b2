//! Wake-ups. Inside one process a write that makes work claimable wakes
//! the waiters of its queue at once, through a [`Notify`] per (database,
//! queue) shared by every handle on that database in the process. SQLite
//! cannot signal another process, so waiters also wake after the poll
//! interval: that bounds how late work from another process is seen.
//!
//! Cancel requests travel the same way, through one process-wide
//! [`SignalHub`]: a worker in this process learns of a cancel made in this
//! process at once, and of one made in another at its next heartbeat.
//! Endings ([`leaseq_core::History::finished_signal`]) have a hub of their
//! own: a waiter in this process learns of an ending recorded in this
//! process at once, and of one in another at its poll.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use leaseq_core::signal::{Signal, SignalHub};
use tokio::sync::Notify;

/// Waiters per (database, queue). Entries are weak, so a queue nobody
/// waits on costs nothing once its waiters are gone.
type Waiters = Mutex<HashMap<(String, String), Weak<Notify>>>;

/// The waiters of the whole process.
fn registry() -> &'static Waiters {
    static REGISTRY: OnceLock<Waiters> = OnceLock::new();
    REGISTRY.get_or_init(Mutex::default)
}

/// Cancel requests of the whole process, by database and queue.
fn cancels() -> &'static SignalHub {
    static CANCELS: OnceLock<SignalHub> = OnceLock::new();
    CANCELS.get_or_init(SignalHub::default)
}

/// Endings of the whole process, by database and queue.
fn finishes() -> &'static SignalHub {
    static FINISHES: OnceLock<SignalHub> = OnceLock::new();
    FINISHES.get_or_init(SignalHub::default)
}

/// The wake-ups of one database.
#[derive(Debug)]
pub(crate) struct Wakeups {
    /// Names the database: its file's path, or the in-memory database's name.
    db: String,
    poll: Duration,
}

impl Wakeups {
    pub(crate) fn new(db: String, poll: Duration) -> Self {
        Wakeups { db, poll }
    }

    fn key(&self, queue: &str) -> (String, String) {
        (self.db.clone(), queue.to_owned())
    }

    /// Waits for a wake-up on `queue`, at most `timeout` and at most the
    /// poll interval.
    pub(crate) async fn wait(&self, queue: &str, timeout: Duration) {
        let n = {
            let mut map = registry().lock().unwrap_or_else(PoisonError::into_inner);
            let key = self.key(queue);
            match map.get(&key).and_then(Weak::upgrade) {
                Some(n) => n,
                None => {
                    map.retain(|_, w| w.strong_count() > 0);
                    let n = Arc::new(Notify::new());
                    map.insert(key, Arc::downgrade(&n));
                    n
                }
            }
        };
        let notified = n.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let _ = tokio::time::timeout(timeout.min(self.poll), notified).await;
    }

    fn hub_key(&self, queue: &str) -> String {
        format!("{}\0{queue}", self.db)
    }

    /// Subscribes to cancel requests on `queue`'s leases made in this
    /// process.
    pub(crate) fn cancel_signal(&self, queue: &str) -> Signal {
        cancels().subscribe(&self.hub_key(queue))
    }

    /// Tells this process's workers on `queue` that a cancel was requested.
    pub(crate) fn cancel_requested(&self, queue: &str) {
        cancels().fire(&self.hub_key(queue));
    }

    /// Subscribes to endings on `queue` recorded in this process.
    pub(crate) fn finished_signal(&self, queue: &str) -> Signal {
        finishes().subscribe(&self.hub_key(queue))
    }

    /// Tells this process's waiters on `queue` that an item may have been
    /// kept finished. Whether the statement kept anything is known only
    /// to its trigger, so every call that may end an item fires; a queue
    /// nobody waits on costs a look-up in the hub, and no SQL.
    pub(crate) fn finished(&self, queue: &str) {
        finishes().fire(&self.hub_key(queue));
    }

    /// Wakes every waiter of `queue` in this process.
    pub(crate) fn wake(&self, queue: &str) {
        let n = {
            let map = registry().lock().unwrap_or_else(PoisonError::into_inner);
            map.get(&self.key(queue)).and_then(Weak::upgrade)
        };
        if let Some(n) = n {
            n.notify_waiters();
        }
    }
}
