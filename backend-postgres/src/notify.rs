//! Wake-ups: one `LISTEN` connection per backend (shared by all its clones
//! and workers) fans notifications out to per-queue [`Notify`]s. A
//! notification is a hint; the bounded poll in `wait` is the source of truth.
//!
//! The same connection carries cancel requests: a `cancel <queue>` payload
//! (no queue name holds a space) fires the queue's [`Signal`] instead, and
//! endings kept by the History group a `done <queue>` payload, the queue's
//! finished signal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use leaseq_core::backoff::Backoff;
use leaseq_core::signal::{Signal, SignalHub};
use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Waiters per queue name. Entries are weak, so a queue nobody waits on
/// costs nothing once its waiters are gone.
#[derive(Debug, Default)]
struct Registry {
    queues: Mutex<HashMap<String, Weak<Notify>>>,
}

impl Registry {
    fn get(&self, queue: &str) -> Arc<Notify> {
        let mut map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get(queue).and_then(Weak::upgrade) {
            return n;
        }
        map.retain(|_, w| w.strong_count() > 0);
        let n = Arc::new(Notify::new());
        map.insert(queue.to_owned(), Arc::downgrade(&n));
        n
    }

    fn wake(&self, queue: &str) {
        let n = {
            let map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            map.get(queue).and_then(Weak::upgrade)
        };
        if let Some(n) = n {
            n.notify_waiters();
        }
    }

    fn wake_all(&self) {
        let all: Vec<Arc<Notify>> = {
            let map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            map.values().filter_map(Weak::upgrade).collect()
        };
        for n in all {
            n.notify_waiters();
        }
    }
}

/// The listener of one backend.
#[derive(Debug)]
pub(crate) struct Wakeups {
    pool: PgPool,
    channel: String,
    poll: Duration,
    registry: Arc<Registry>,
    cancels: Arc<SignalHub>,
    finishes: Arc<SignalHub>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Wakeups {
    pub(crate) fn new(pool: PgPool, channel: String, poll: Duration) -> Self {
        Wakeups {
            pool,
            channel,
            poll,
            registry: Arc::default(),
            cancels: Arc::default(),
            finishes: Arc::default(),
            task: Mutex::new(None),
        }
    }

    /// Waits for a notification on `queue`, at most `timeout` and at most
    /// the poll interval.
    pub(crate) async fn wait(&self, queue: &str, timeout: Duration) {
        self.start();
        let n = self.registry.get(queue);
        let notified = n.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let _ = tokio::time::timeout(timeout.min(self.poll), notified).await;
    }

    /// Subscribes to cancel requests on `queue`'s leases, from any process.
    pub(crate) fn cancel_signal(&self, queue: &str) -> Signal {
        self.start();
        self.cancels.subscribe(queue)
    }

    /// Subscribes to kept endings of `queue`'s items, from any process.
    pub(crate) fn finished_signal(&self, queue: &str) -> Signal {
        self.start();
        self.finishes.subscribe(queue)
    }

    /// Starts the listener task on first use, or again if it ended (e.g. its
    /// runtime went away).
    fn start(&self) {
        let mut task = self.task.lock().unwrap_or_else(|p| p.into_inner());
        if task.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let pool = self.pool.clone();
        let channel = self.channel.clone();
        let fanout = Fanout {
            work: Arc::clone(&self.registry),
            cancels: Arc::clone(&self.cancels),
            finishes: Arc::clone(&self.finishes),
        };
        *task = Some(handle.spawn(listen(pool, channel, fanout)));
    }
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        let task = self.task.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = task.take() {
            t.abort();
        }
    }
}

/// Where the listener sends what it hears.
struct Fanout {
    work: Arc<Registry>,
    cancels: Arc<SignalHub>,
    finishes: Arc<SignalHub>,
}

impl Fanout {
    fn heard(&self, payload: &str) {
        if let Some(queue) = payload.strip_prefix("cancel ") {
            self.cancels.fire(queue);
        } else if let Some(queue) = payload.strip_prefix("done ") {
            self.finishes.fire(queue);
        } else {
            self.work.wake(payload);
        }
    }

    /// Notifications may have been missed: everyone looks for themselves.
    fn everyone(&self) {
        self.work.wake_all();
        self.cancels.fire_all();
        self.finishes.fire_all();
    }
}

/// The listener loop: (re)connects with backoff; after every (re)connect
/// and every lost connection it wakes everyone, since notifications sent
/// meanwhile are gone.
async fn listen(pool: PgPool, channel: String, fanout: Fanout) {
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(5));
    loop {
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(error = %e, "leaseq-postgres: listener cannot connect");
                tokio::time::sleep(backoff.next_wait()).await;
                continue;
            }
        };
        if let Err(e) = listener.listen(&channel).await {
            tracing::debug!(error = %e, "leaseq-postgres: LISTEN failed");
            tokio::time::sleep(backoff.next_wait()).await;
            continue;
        }
        backoff.reset();
        fanout.everyone();
        loop {
            match listener.try_recv().await {
                Ok(Some(n)) => fanout.heard(n.payload()),
                // The connection was lost; the next try_recv reconnects.
                Ok(None) => fanout.everyone(),
                Err(e) => {
                    tracing::debug!(error = %e, "leaseq-postgres: listener failed");
                    fanout.everyone();
                    tokio::time::sleep(backoff.next_wait()).await;
                    break;
                }
            }
        }
    }
}
