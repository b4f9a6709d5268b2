//! The backend handle: shared queues behind cheap clones, the clock, limits.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use leaseq_core::testing::StepCounter;
use leaseq_core::{Bounds, Clock, QueueName, SystemClock};
use tokio::sync::Notify;

use crate::state::QueueState;

/// The in-process backend: every queue lives in this process's memory.
///
/// Clones are cheap and share every queue. Each queue has its own lock, held
/// only for the few index updates one operation makes and never across an
/// `.await`, and its own wake-up signal for [`leaseq_core::Backend::wait_for_work`].
///
/// Not durable and not shared across processes: see
/// [`leaseq_core::Capabilities`].
#[derive(Clone)]
pub struct MemoryBackend {
    pub(crate) shared: Arc<Shared>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) limits: Bounds,
    pub(crate) test_hooks: bool,
    /// Critical sections per queue, counted with test hooks on.
    pub(crate) steps: Arc<StepCounter>,
}

/// What every clone of one backend shares.
#[derive(Default)]
pub(crate) struct Shared {
    queues: RwLock<HashMap<QueueName, Arc<Queue>>>,
    /// The last id handed out, in any queue (0 is never handed out, so
    /// planted entries can sort before every real one).
    last_id: AtomicU64,
    /// The live-worker registry: id → (encoded entry, expires at ms).
    pub(crate) workers: Mutex<std::collections::BTreeMap<String, (String, u64)>>,
    /// The stored schedules, by name (see `schedules.rs`).
    /// Cancel requests on leases, for the workers holding them.
    pub(crate) cancels: leaseq_core::signal::SignalHub,
    /// Endings recorded, for [`leaseq_core::History::finished_signal`].
    pub(crate) finishes: Arc<leaseq_core::signal::SignalHub>,
    /// Job events, for [`leaseq_core::Events::subscribe`].
    pub(crate) events: Arc<leaseq_core::events::EventHub>,
    /// The completion counters of queues forgotten while idle, so that a
    /// queue made again counts on ([`QueueStats::completed`](leaseq_core::QueueStats::completed)).
    completions: Mutex<HashMap<QueueName, u64>>,
    pub(crate) schedules: Mutex<
        std::collections::BTreeMap<
            leaseq_core::schedule::ScheduleName,
            leaseq_core::schedule::StoredSchedule,
        >,
    >,
}

/// One queue: its state under a lock, and its wake-up signal.
#[derive(Default)]
pub(crate) struct Queue {
    state: Mutex<QueueState>,
    notify: Notify,
    /// Tasks inside `wait_for_work`; wake-ups are skipped while there are none.
    waiters: AtomicUsize,
}

impl Queue {
    /// Locks the queue's state. A panic in another holder cannot leave the
    /// indexes half-updated (no transition panics), so a poisoned lock is
    /// taken over rather than passed on as a panic.
    pub(crate) fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes every task waiting for work on this queue.
    pub(crate) fn wake(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            self.notify.notify_waiters();
        }
    }

    /// Registers a waiter until the guard drops.
    pub(crate) fn waiter(&self) -> WaiterGuard<'_> {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        WaiterGuard(self)
    }

    /// The signal `wake` raises.
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }
}

/// Counts one task in `wait_for_work`, also when its future is dropped.
pub(crate) struct WaiterGuard<'a>(&'a Queue);

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

impl MemoryBackend {
    /// A backend on the system clock with default limits.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(SystemClock))
    }

    /// A backend on `clock`, e.g. a [`leaseq_core::ManualClock`] in tests.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        MemoryBackend {
            shared: Arc::new(Shared::default()),
            clock,
            limits: Bounds::default(),
            test_hooks: false,
            steps: Arc::new(StepCounter::new(false)),
        }
    }

    /// This handle with [`leaseq_core::testing::TestHooks`] turned on, for test
    /// suites: they expire live leases and plant corrupt entries, so a
    /// handle made by [`MemoryBackend::new`] has none.
    #[must_use]
    pub fn with_test_hooks(mut self) -> Self {
        self.test_hooks = true;
        self.steps = Arc::new(StepCounter::new(true));
        self
    }

    /// This handle with `limits` (other clones keep their own limits but
    /// share the queues).
    #[must_use]
    pub fn with_limits(mut self, limits: Bounds) -> Self {
        self.limits = limits;
        self
    }

    /// The clock's now, in ms.
    pub(crate) fn now_ms(&self) -> u64 {
        self.clock.now().as_millis()
    }

    /// The live-worker registry, locked.
    pub(crate) fn worker_entries(
        &self,
    ) -> MutexGuard<'_, std::collections::BTreeMap<String, (String, u64)>> {
        self.shared
            .workers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the queue if it exists.
    pub(crate) fn existing<R>(&self, name: &QueueName, f: impl FnOnce(&Queue) -> R) -> Option<R> {
        self.steps.count(name);
        let map = self
            .shared
            .queues
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        map.get(name).map(|q| f(q))
    }

    /// Runs `f` on the queue, creating it first if needed.
    pub(crate) fn ensure<R>(&self, name: &QueueName, f: impl FnOnce(&Queue) -> R) -> R {
        self.steps.count(name);
        {
            let map = self
                .shared
                .queues
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(q) = map.get(name) {
                return f(q);
            }
        }
        let mut map = self
            .shared
            .queues
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        f(map.entry(name.clone()).or_insert_with(|| self.make(name)))
    }

    /// A new queue named `name`, wired to this backend's hubs, counting on
    /// from its completions before it was forgotten.
    fn make(&self, name: &QueueName) -> Arc<Queue> {
        let q = Arc::<Queue>::default();
        let mut st = q.lock();
        st.kept.announce = Some((Arc::clone(&self.shared.finishes), name.clone()));
        st.events = crate::emitter::Emitter::new(Arc::clone(&self.shared.events), name.clone());
        st.completed = self.completions().remove(name).unwrap_or(0);
        drop(st);
        q
    }

    fn completions(&self) -> MutexGuard<'_, HashMap<QueueName, u64>> {
        self.shared
            .completions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The completion count of `name` while it is forgotten.
    pub(crate) fn forgotten_completions(&self, name: &QueueName) -> u64 {
        self.completions().get(name).copied().unwrap_or(0)
    }

    /// Forgets `name`'s completion count (a deleted queue counts from 0).
    pub(crate) fn forget_completions(&self, name: &QueueName) {
        self.completions().remove(name);
    }

    /// The next item id: unique across this backend's queues and never
    /// reused, so a purged or forgotten queue cannot hand an old id out
    /// again.
    pub(crate) fn next_id(&self) -> u64 {
        self.shared.last_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Forgets the queue when nothing is left in it and nobody holds it
    /// (no waiter): memory stays bounded with dynamic queue names. The map's
    /// write lock keeps every operation out, and the count shows no waiter
    /// holds a handle, so no item can land in a forgotten queue.
    pub(crate) fn forget_if_idle(&self, name: &QueueName) {
        let now = self.now_ms();
        let mut map = self
            .shared
            .queues
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let idle = map.get(name).is_some_and(|q| {
            Arc::strong_count(q) == 1
                && q.waiters.load(Ordering::SeqCst) == 0
                && q.lock().is_idle(now)
        });
        if idle {
            if let Some(q) = map.remove(name) {
                let completed = q.lock().completed;
                if completed > 0 {
                    self.completions().insert(name.clone(), completed);
                }
            }
        }
    }

    /// The queues whose indexes hold an entry (what `stats` counts), sorted.
    /// The map also keeps queues with nothing but limits, held dedup keys
    /// or a waiter: those are left out. Each queue is read under its own
    /// lock, so a queue emptied or filled by a call that returned before
    /// is seen as that call left it.
    pub(crate) fn listed(&self) -> Vec<QueueName> {
        let map = self
            .shared
            .queues
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<QueueName> = map
            .iter()
            .filter(|(_, q)| q.lock().holds_entries())
            .map(|(name, _)| name.clone())
            .collect();
        out.sort();
        out
    }

    /// How many queues this backend keeps in memory.
    pub fn queues_in_memory(&self) -> usize {
        self.shared
            .queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// A handle on the queue, creating it first if needed.
    pub(crate) fn handle(&self, name: &QueueName) -> Arc<Queue> {
        {
            let map = self
                .shared
                .queues
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(q) = map.get(name) {
                return Arc::clone(q);
            }
        }
        let mut map = self
            .shared
            .queues
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        map.entry(name.clone())
            .or_insert_with(|| self.make(name))
            .clone()
    }
}

impl Default for MemoryBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let queues = self
            .shared
            .queues
            .read()
            .map(|m| m.len())
            .unwrap_or_else(|p| p.into_inner().len());
        f.debug_struct("MemoryBackend")
            .field("queues", &queues)
            .field("clock", &self.clock)
            .field("limits", &self.limits)
            .finish()
    }
}
