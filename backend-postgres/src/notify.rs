//! Wake-ups: one `LISTEN` connection per backend (shared by all its clones
//! and workers) fans notifications out to per-queue [`Notify`]s. A
//! notification is a hint; the bounded poll in `wait` is the source of truth.
//!
//! The same connection carries cancel requests: a `cancel <queue>` payload
//! (no queue name holds a space) fires the queue's [`Signal`] instead, and
//! endings kept by the History group a `done <queue>` payload, the queue's
//! finished signal. Job events come as `event <queue> <wire>` (the text of
//! [`JobEvent::to_wire`]), an event too long for one notification as
//! `eventpart <queue> <piece>` notifications before its last piece (see
//! [`crate::events`]); they go to the [`EventHub`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaseq_core::backoff::Backoff;
use leaseq_core::events::{EventHub, JobEvent};
use leaseq_core::signal::{Signal, SignalHub};
use leaseq_core::{Error, Result};
use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::{watch, Notify};
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
    events: Arc<EventHub>,
    /// True while the listener's `LISTEN` is in force.
    listening: Arc<watch::Sender<bool>>,
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
            events: Arc::default(),
            listening: Arc::new(watch::Sender::new(false)),
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

    /// The job events heard, from any process.
    pub(crate) fn events(&self) -> Arc<EventHub> {
        Arc::clone(&self.events)
    }

    /// Starts the listener if needed and waits, at most `timeout`, until
    /// its `LISTEN` is in force: a notification committed from then on
    /// reaches it (unless its connection drops).
    pub(crate) async fn listening(&self, timeout: Duration) -> Result<()> {
        self.start();
        let mut on = self.listening.subscribe();
        let up = tokio::time::timeout(timeout, on.wait_for(|on| *on))
            .await
            .is_ok_and(|r| r.is_ok());
        if up {
            return Ok(());
        }
        Err(Error::unavailable(
            "events: the LISTEN connection",
            format!("not listening after {timeout:?}"),
        ))
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
        // A task that ended left the flag as it was.
        self.listening.send_replace(false);
        let fanout = Fanout {
            work: Arc::clone(&self.registry),
            cancels: Arc::clone(&self.cancels),
            finishes: Arc::clone(&self.finishes),
            events: Arc::clone(&self.events),
            part: None,
            listening: Arc::clone(&self.listening),
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

/// The most text of one event kept while its pieces come: more than any
/// event's (a progress value's hex is at most 8 KiB).
const MAX_PARTS: usize = 64 * 1024;

/// Where the listener sends what it hears.
struct Fanout {
    work: Arc<Registry>,
    cancels: Arc<SignalHub>,
    finishes: Arc<SignalHub>,
    events: Arc<EventHub>,
    /// The queue and the text so far of an event whose pieces are coming.
    /// One transaction's notifications arrive together, in order, so its
    /// pieces are never mixed with another's.
    part: Option<(String, String)>,
    listening: Arc<watch::Sender<bool>>,
}

impl Fanout {
    fn heard(&mut self, payload: &str) {
        if let Some(queue) = payload.strip_prefix("cancel ") {
            self.cancels.fire(queue);
        } else if let Some(queue) = payload.strip_prefix("done ") {
            self.finishes.fire(queue);
        } else if let Some(rest) = payload.strip_prefix("event ") {
            self.event(rest);
        } else if let Some(rest) = payload.strip_prefix("eventpart ") {
            self.event_part(rest);
        } else {
            self.work.wake(payload);
        }
    }

    /// The last (or only) piece of an event: `<queue> <piece>`.
    fn event(&mut self, rest: &str) {
        let part = self.part.take();
        let Some((queue, piece)) = rest.split_once(' ') else {
            tracing::warn!(payload = rest, "leaseq-postgres: an event without a queue");
            return;
        };
        let text = match part {
            Some((q, mut text)) if q == queue => {
                text.push_str(piece);
                text
            }
            Some((q, _)) => {
                tracing::warn!(queue = q, "leaseq-postgres: dropped an event cut short");
                piece.to_owned()
            }
            None => piece.to_owned(),
        };
        // Nothing is decoded for a queue nobody follows in this process.
        if !self.events.is_watched(queue) {
            return;
        }
        match JobEvent::from_wire(&text) {
            Ok(event) => self.events.publish(queue, || event),
            Err(e) => {
                tracing::warn!(queue, error = %e, "leaseq-postgres: skipped an event that does not read")
            }
        }
    }

    /// A piece of an event before its last: `<queue> <piece>`.
    fn event_part(&mut self, rest: &str) {
        let Some((queue, piece)) = rest.split_once(' ') else {
            tracing::warn!(
                payload = rest,
                "leaseq-postgres: an event piece without a queue"
            );
            return;
        };
        match &mut self.part {
            Some((q, text)) if q == queue && text.len() + piece.len() <= MAX_PARTS => {
                text.push_str(piece)
            }
            other => {
                if let Some((q, _)) = other {
                    tracing::warn!(queue = %q, "leaseq-postgres: dropped an event cut short");
                }
                *other = Some((queue.to_owned(), piece.to_owned()));
            }
        }
    }

    /// Notifications may have been missed: everyone looks for themselves.
    /// (Events missed are lost: delivery is at most once.)
    fn everyone(&mut self) {
        self.part = None;
        self.work.wake_all();
        self.cancels.fire_all();
        self.finishes.fire_all();
    }

    /// Whether the `LISTEN` is in force, for [`Wakeups::listening`].
    fn set_listening(&self, on: bool) {
        self.listening.send_replace(on);
    }
}

/// The listener loop: (re)connects with backoff; after every (re)connect
/// and every lost connection it wakes everyone, since notifications sent
/// meanwhile are gone.
async fn listen(pool: PgPool, channel: String, mut fanout: Fanout) {
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
        fanout.set_listening(true);
        fanout.everyone();
        loop {
            match listener.try_recv().await {
                Ok(Some(n)) => fanout.heard(n.payload()),
                // The connection was lost. Connect again here rather than
                // in the next try_recv, so that `listening` knows when the
                // LISTEN is back.
                Ok(None) => {
                    fanout.set_listening(false);
                    fanout.everyone();
                    break;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "leaseq-postgres: listener failed");
                    fanout.set_listening(false);
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
    use leaseq_core::events::EventKind;
    use leaseq_core::ItemId;
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

    fn fanout(events: &Arc<EventHub>) -> Fanout {
        Fanout {
            work: Arc::default(),
            cancels: Arc::default(),
            finishes: Arc::default(),
            events: Arc::clone(events),
            part: None,
            listening: Arc::new(watch::Sender::new(false)),
        }
    }

    #[tokio::test]
    async fn events_are_read_joined_and_skipped_when_they_do_not_read() {
        let hub = Arc::new(EventHub::default());
        let (mut stream, _) = hub.subscribe("q");
        let mut f = fanout(&hub);
        for payload in [
            "event q enqueued 7",
            "event q exploded 7",
            "event q",
            "eventpart q star",
            "event q ted 7 2",
            // A piece whose rest never came is dropped with it.
            "eventpart other progress 9 ab",
            "event q released 7",
            "event unfollowed enqueued 1",
            "eventpart q progress 7 ",
            "eventpart q 00",
            "event q ff",
        ] {
            f.heard(payload);
        }
        let id = ItemId::new(7);
        let want = [
            EventKind::Enqueued,
            EventKind::Started { attempt: 2 },
            EventKind::Released,
            EventKind::Progress(leaseq_core::Bytes::from_static(b"\x00\xff")),
        ];
        for kind in want {
            let got = stream.next().await.and_then(|r| r.ok());
            assert_eq!(got, Some(JobEvent::new(id, kind)));
        }
        // A reconnect forgets a piece half heard.
        f.heard("eventpart q enqueued");
        f.everyone();
        f.heard("event q  8");
        f.heard("event q enqueued 8");
        let got = stream.next().await.and_then(|r| r.ok());
        assert_eq!(
            got,
            Some(JobEvent::new(ItemId::new(8), EventKind::Enqueued))
        );
    }
}
