//! Wake-ups: one `LISTEN` connection per backend (shared by all its clones
//! and workers) fans notifications out to per-queue [`Notify`]s. A
//! notification is a hint; the bounded poll in `wait` is the source of truth.
//!
//! The same connection carries cancel requests: a `cancel <queue>` payload
//! (no queue name holds a space) fires the queue's [`Signal`] instead, and
//! endings kept by the History group a `done <queue>` payload, the queue's
//! finished signal.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaseq_core::backoff::Backoff;
use leaseq_core::signal::{Signal, SignalHub};
use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Queues the registry remembers before it forgets idle ones.
const REMEMBERED_QUEUES: usize = 1024;

/// One queue's wake-ups. `woken` counts the notifications heard; `seen`
/// is the count the latest claim or wait already answered for: a claim
/// reads it before its statement, a wait when it returns. A notification
/// heard while a claim runs, or after it and before the caller waits,
/// leaves `woken` ahead, and the wait returns at once: the claim's
/// snapshot may have been taken before the item committed.
#[derive(Debug, Default)]
struct QueueWake {
    notify: Notify,
    woken: AtomicU64,
    seen: AtomicU64,
}

impl QueueWake {
    fn wake(&self) {
        // Counted before the waiters are told: a waiter that registers
        // after `notify_waiters` sees the count instead.
        self.woken.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Marks every notification heard so far as answered; true when some
    /// were not yet.
    fn mark_seen(&self) -> bool {
        let now = self.woken.load(Ordering::SeqCst);
        self.seen.fetch_max(now, Ordering::SeqCst) < now
    }
}

/// Wake-up state per queue name. Entries outlive their waiters, since a
/// claim's count must survive until its caller waits; past
/// [`REMEMBERED_QUEUES`] the ones nobody holds are forgotten.
#[derive(Debug, Default)]
struct Registry {
    queues: Mutex<HashMap<String, Arc<QueueWake>>>,
}

impl Registry {
    fn get(&self, queue: &str) -> Arc<QueueWake> {
        let mut map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get(queue) {
            return Arc::clone(n);
        }
        if map.len() >= REMEMBERED_QUEUES {
            map.retain(|_, w| Arc::strong_count(w) > 1);
        }
        let n = Arc::new(QueueWake::default());
        map.insert(queue.to_owned(), Arc::clone(&n));
        n
    }

    /// Notes that a claim on `queue` begins (before its statement runs):
    /// its snapshot covers every notification heard so far.
    fn claim_begins(&self, queue: &str) {
        self.get(queue).mark_seen();
    }

    /// Waits for a notification on `queue`, at most `timeout`; returns at
    /// once when one was heard since the latest claim on it began (or the
    /// latest wait returned).
    async fn wait(&self, queue: &str, timeout: Duration) {
        let q = self.get(queue);
        let notified = q.notify.notified();
        tokio::pin!(notified);
        // Registered before the count is read, so a notification in
        // between is seen one way or the other.
        notified.as_mut().enable();
        if !q.mark_seen() {
            let _ = tokio::time::timeout(timeout, notified).await;
            // The caller claims next; its snapshot covers what woke it.
            q.mark_seen();
        }
    }

    fn wake(&self, queue: &str) {
        let n = {
            let map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            map.get(queue).cloned()
        };
        if let Some(n) = n {
            n.wake();
        }
    }

    fn wake_all(&self) {
        let all: Vec<Arc<QueueWake>> = {
            let map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            map.values().cloned().collect()
        };
        for n in all {
            n.wake();
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
    /// the poll interval; returns at once when one was heard since the
    /// latest claim on `queue` began (or the latest wait returned).
    pub(crate) async fn wait(&self, queue: &str, timeout: Duration) {
        self.start();
        self.registry.wait(queue, timeout.min(self.poll)).await;
    }

    /// Notes that a claim on `queue` begins: call it before the claim's
    /// statement, so a notification heard while it runs is not lost.
    pub(crate) fn claim_begins(&self, queue: &str) {
        self.registry.claim_begins(queue);
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    const POLL: Duration = Duration::from_secs(1);

    /// How long `wait` took on the paused clock: zero when it returned at
    /// once, the whole poll when it slept.
    async fn waited(registry: &Registry, queue: &str) -> Duration {
        let t0 = Instant::now();
        registry.wait(queue, POLL).await;
        t0.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn a_notification_heard_during_the_claim_ends_the_next_wait_at_once() {
        let r = Registry::default();
        r.claim_begins("q");
        // Heard while the claim's statement runs (or before the wait).
        r.wake("q");
        assert_eq!(waited(&r, "q").await, Duration::ZERO);
        // Other queues are not woken by it.
        r.claim_begins("other");
        assert_eq!(waited(&r, "other").await, POLL);
    }

    #[tokio::test(start_paused = true)]
    async fn a_notification_before_the_claim_does_not_skip_the_wait() {
        let r = Registry::default();
        r.claim_begins("q");
        r.wake("q");
        // This claim's snapshot already sees what that notification meant.
        r.claim_begins("q");
        assert_eq!(waited(&r, "q").await, POLL);
    }

    #[tokio::test(start_paused = true)]
    async fn a_notification_during_the_wait_ends_it() {
        let r = Arc::new(Registry::default());
        r.claim_begins("q");
        let waiter = {
            let r = Arc::clone(&r);
            tokio::spawn(async move { waited(&r, "q").await })
        };
        // Let the waiter register, then wake it.
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        r.wake("q");
        let took = waiter.await.expect("waiter");
        assert!(took < POLL, "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_answers_for_what_it_returned_on() {
        let r = Registry::default();
        r.claim_begins("q");
        r.wake("q");
        assert_eq!(waited(&r, "q").await, Duration::ZERO);
        // Nothing new since: a second wait without a claim sleeps.
        assert_eq!(waited(&r, "q").await, POLL);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconnect_wakes_every_queue_once() {
        let r = Registry::default();
        r.claim_begins("a");
        r.claim_begins("b");
        r.wake_all();
        assert_eq!(waited(&r, "a").await, Duration::ZERO);
        assert_eq!(waited(&r, "b").await, Duration::ZERO);
        r.claim_begins("a");
        assert_eq!(waited(&r, "a").await, POLL);
    }

    #[test]
    fn idle_queues_are_forgotten_only_past_the_bound_and_held_ones_never() {
        let r = Registry::default();
        let held = r.get("held");
        held.wake();
        for i in 0..REMEMBERED_QUEUES {
            r.claim_begins(&format!("q{i}"));
        }
        let map = r.queues.lock().unwrap_or_else(|p| p.into_inner());
        assert!(map.len() <= REMEMBERED_QUEUES, "{}", map.len());
        assert!(map.get("held").is_some_and(|q| Arc::ptr_eq(q, &held)));
    }
}
