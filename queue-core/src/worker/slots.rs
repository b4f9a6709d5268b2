//! How much a worker may claim: handler slots, the leases it holds, and a
//! small buffer of claimed jobs waiting for a slot while handlers are short.
//!
//! A claim costs one round trip whatever its size, so a worker whose
//! handlers finish in microseconds would spend its time on claims of one or
//! two items if it only claimed for free handler slots. While handlers are
//! short, a worker therefore claims ahead: jobs may wait for a slot, their
//! leases kept alive by heartbeats like running ones. The buffer holds
//! `concurrency` jobs, and more while handlers finish in microseconds: as
//! many as the handlers get through in [`AHEAD_WAIT`], so a job claimed
//! ahead waits about that long at most, and a claim of many jobs serves
//! handlers that are done before another claim's round trip would be.
//! When handlers run long, a job claimed ahead would sit out a whole run
//! while another worker could have started it, so the buffer closes and
//! claims ask for the free slots only.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Scheduler turns a claim or an ack batch waits for jobs that are
/// finishing (`yield_now`, no timer), so one round trip carries them all.
pub(crate) const GATHER_TURNS: usize = 4;

/// The longest mean handler time at which a worker still claims ahead.
pub(crate) const CLAIM_AHEAD_BELOW: Duration = Duration::from_millis(10);

/// About the longest a job claimed ahead waits for a slot, reckoned from
/// the mean handler time: the buffer grows past `concurrency` only while
/// the handlers get through it within this time.
pub(crate) const AHEAD_WAIT: Duration = Duration::from_millis(1);

/// No handler has finished yet: the mean is unknown, so no claiming ahead.
const UNKNOWN: u64 = u64::MAX;

/// A worker's capacity, shared by its claim loop and its jobs.
#[derive(Debug)]
pub(crate) struct Slots {
    concurrency: usize,
    /// The most jobs claimed ahead: `concurrency`, or `prefetch` if larger.
    ahead_cap: usize,
    handlers: Arc<Semaphore>,
    leases: Arc<Semaphore>,
    /// Jobs claimed but not yet running their handler.
    waiting: AtomicUsize,
    /// Signalled whenever a handler ends.
    freed: Notify,
    /// Mean handler time in microseconds (moving average), or [`UNKNOWN`].
    mean_us: AtomicU64,
}

impl Slots {
    /// `concurrency` handler slots, and room for the leases of the running
    /// jobs and of the jobs claimed ahead (at most the larger of
    /// `concurrency` and `prefetch`), plus two claims' worth (a claim is at
    /// most `prefetch`) for acks: the batch on its way and the one
    /// gathering behind it. On a backend that runs one write at a time,
    /// less room would make each claim wait for the acks ahead of it and
    /// shrink to what they left free.
    pub(crate) fn new(concurrency: usize, prefetch: u32) -> Arc<Self> {
        let prefetch = usize::try_from(prefetch).unwrap_or(usize::MAX);
        let ahead_cap = concurrency.max(prefetch);
        let held = concurrency.saturating_add(ahead_cap);
        let claim = held.min(prefetch);
        let room = held
            .saturating_add(claim.saturating_mul(2))
            .min(Semaphore::MAX_PERMITS);
        Arc::new(Slots {
            concurrency,
            ahead_cap,
            handlers: Arc::new(Semaphore::new(concurrency)),
            leases: Arc::new(Semaphore::new(room)),
            waiting: AtomicUsize::new(0),
            freed: Notify::new(),
            mean_us: AtomicU64::new(UNKNOWN),
        })
    }

    /// Waits for room for one more lease.
    pub(crate) async fn lease(&self) -> OwnedSemaphorePermit {
        let permit = self.leases.clone().acquire_owned().await;
        permit.unwrap_or_else(|_| unreachable!("the lease semaphore is never closed"))
    }

    /// Adds lease permits to `permits` until it holds `want` or none is free.
    pub(crate) fn gather(&self, permits: &mut Vec<OwnedSemaphorePermit>, want: usize) {
        while permits.len() < want {
            match self.leases.clone().try_acquire_owned() {
                Ok(p) => permits.push(p),
                Err(_) => break,
            }
        }
    }

    /// How many jobs a claim may ask for now: the free handler slots, plus
    /// the room left in the claim-ahead buffer while handlers are short.
    pub(crate) fn demand(&self) -> usize {
        let free = self.handlers.available_permits();
        let ahead = self.ahead();
        (free + ahead).saturating_sub(self.waiting.load(Ordering::Relaxed))
    }

    /// Waits until a handler ends.
    pub(crate) async fn handler_ended(&self) {
        self.freed.notified().await;
    }

    /// Counts `n` claimed jobs as waiting for a handler slot.
    pub(crate) fn claimed(&self, n: usize) {
        self.waiting.fetch_add(n, Ordering::Relaxed);
    }

    /// Waits for a handler slot for a claimed job.
    pub(crate) async fn handler(self: &Arc<Self>) -> Running {
        let permit = self.handlers.clone().acquire_owned().await;
        let permit =
            permit.unwrap_or_else(|_| unreachable!("the handler semaphore is never closed"));
        self.running(permit)
    }

    /// A handler slot for a claimed job if one is free now.
    pub(crate) fn try_handler(self: &Arc<Self>) -> Option<Running> {
        let permit = self.handlers.clone().try_acquire_owned().ok()?;
        Some(self.running(permit))
    }

    fn running(self: &Arc<Self>, permit: OwnedSemaphorePermit) -> Running {
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        Running {
            slots: self.clone(),
            _permit: permit,
            started: tokio::time::Instant::now(),
            ran: None,
        }
    }

    /// A claimed job that ends without running its handler.
    pub(crate) fn never_started(&self) {
        self.waiting.fetch_sub(1, Ordering::Relaxed);
    }

    /// The claim-ahead buffer's size for the mean handler time: none while
    /// it is unknown or long, `concurrency` while it is short, and what the
    /// handlers get through in [`AHEAD_WAIT`] (up to the cap) when that is
    /// more.
    fn ahead(&self) -> usize {
        let mean = self.mean_us.load(Ordering::Relaxed);
        if mean == UNKNOWN || u128::from(mean) >= CLAIM_AHEAD_BELOW.as_micros() {
            return 0;
        }
        let wait_us = u64::try_from(AHEAD_WAIT.as_micros()).unwrap_or(u64::MAX);
        let in_wait = usize::try_from(wait_us / mean.max(1))
            .unwrap_or(usize::MAX)
            .saturating_mul(self.concurrency);
        in_wait.clamp(self.concurrency, self.ahead_cap)
    }

    fn record(&self, ran: Duration) {
        let sample = u64::try_from(ran.as_micros()).unwrap_or(u64::MAX - 1);
        let mean = self.mean_us.load(Ordering::Relaxed);
        // A moving average over about eight jobs; racing updates may drop a
        // sample, which only slows how fast the average follows.
        let next = if mean == UNKNOWN {
            sample
        } else {
            mean - mean / 8 + sample / 8
        };
        self.mean_us.store(next, Ordering::Relaxed);
    }
}

/// A handler slot in use; dropping it frees the slot and records how long
/// the handler ran.
#[derive(Debug)]
pub(crate) struct Running {
    slots: Arc<Slots>,
    _permit: OwnedSemaphorePermit,
    started: tokio::time::Instant,
    /// The run's length once [`Running::end`] read the clock.
    ran: Option<Duration>,
}

impl Running {
    /// When the handler got its slot.
    pub(crate) fn started(&self) -> tokio::time::Instant {
        self.started
    }

    /// How long the handler ran, read once: the slot records the same
    /// figure when it is dropped.
    pub(crate) fn end(&mut self) -> Duration {
        *self.ran.get_or_insert_with(|| self.started.elapsed())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let ran = self.end();
        self.slots.record(ran);
        self.slots.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn claims_ahead_only_while_handlers_are_short() {
        let slots = Slots::new(4, 8);
        // Unknown handler time: only the free slots.
        assert_eq!(slots.demand(), 4);
        slots.claimed(4);
        assert_eq!(slots.demand(), 0);
        for _ in 0..4 {
            drop(slots.handler().await);
        }
        // Four short runs: the buffer opens.
        assert_eq!(slots.demand(), 12);
        slots.record(Duration::from_secs(1));
        for _ in 0..8 {
            slots.record(Duration::from_secs(1));
        }
        assert_eq!(slots.demand(), 4, "long handlers close the buffer");
    }

    #[tokio::test]
    async fn room_covers_running_ahead_and_two_claims_of_acks() {
        for (concurrency, prefetch, room) in [(4, 8, 28), (4, 2, 12), (4, 1000, 3004), (1, 1, 4)] {
            let slots = Slots::new(concurrency, prefetch);
            let mut permits = Vec::new();
            slots.gather(&mut permits, 10_000);
            assert_eq!(
                permits.len(),
                room,
                "concurrency {concurrency}, prefetch {prefetch}"
            );
        }
    }

    #[tokio::test]
    async fn waiting_jobs_count_against_the_demand() {
        let slots = Slots::new(2, 4);
        slots.record(Duration::from_micros(500));
        assert_eq!(
            slots.demand(),
            6,
            "two free slots, four ahead (500 µs: four in 1 ms)"
        );
        slots.claimed(5);
        assert_eq!(slots.demand(), 1);
        let running = slots.handler().await;
        assert_eq!(slots.demand(), 1, "one running, four waiting, room for one");
        slots.never_started();
        drop(running);
        assert_eq!(slots.demand(), 3);
    }

    #[tokio::test]
    async fn the_buffer_follows_how_many_handlers_finish_in_the_wait() {
        let slots = Slots::new(4, 100);
        let ahead_at = |mean: Duration| {
            slots
                .mean_us
                .store(mean.as_micros() as u64, Ordering::Relaxed);
            slots.demand() - 4
        };
        assert_eq!(ahead_at(Duration::from_millis(5)), 4, "short: concurrency");
        assert_eq!(ahead_at(Duration::from_micros(400)), 8, "4 × 1 ms / 400 µs");
        assert_eq!(ahead_at(Duration::from_micros(50)), 80, "4 × 1 ms / 50 µs");
        assert_eq!(
            ahead_at(Duration::from_micros(1)),
            100,
            "capped at prefetch"
        );
        assert_eq!(ahead_at(Duration::ZERO), 100, "sub-microsecond handlers");
        assert_eq!(ahead_at(Duration::from_millis(20)), 0, "long: none");
        let small = Slots::new(4, 2);
        small.record(Duration::ZERO);
        assert_eq!(small.demand(), 8, "the cap is never below concurrency");
    }
}
