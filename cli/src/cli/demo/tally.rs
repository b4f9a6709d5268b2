//! What the demo counts: every enqueue and every successful ack by item id,
//! and the verdict drawn from them at the end.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use leaseq::{ItemId, QueueStats};

/// Enqueues and acks by id. Acks are counted from the worker events (and
/// late acks of crashed workers that the backend accepted), never from
/// handler runs, so a duplicate here is a real double ack.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    enqueued: Mutex<HashMap<ItemId, Instant>>,
    acked: Mutex<HashMap<ItemId, (u32, Instant)>>,
    acked_unique: AtomicU64,
    /// Items whose handler finished well, so the worker went on to ack them.
    handled: Mutex<HashSet<ItemId>>,
    /// Items whose late ack went unanswered (its outcome unknown): it may
    /// have landed.
    late_unanswered: Mutex<HashSet<ItemId>>,
    pub(crate) crashes: AtomicU64,
    pub(crate) dropped_leases: AtomicU64,
    pub(crate) late_rejected: AtomicU64,
    pub(crate) late_accepted: AtomicU64,
    pub(crate) reaped: AtomicU64,
    pub(crate) repaired: AtomicU64,
}

impl Tally {
    pub(crate) fn enqueued(&self, ids: impl IntoIterator<Item = ItemId>, at: Instant) {
        let mut map = lock(&self.enqueued);
        for id in ids {
            map.insert(id, at);
        }
    }

    pub(crate) fn acked(&self, id: ItemId) {
        let mut map = lock(&self.acked);
        let entry = map.entry(id).or_insert((0, Instant::now()));
        entry.0 += 1;
        if entry.0 == 1 {
            self.acked_unique.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A late ack of `id` whose reply was lost.
    pub(crate) fn late_ack_unanswered(&self, id: ItemId) {
        lock(&self.late_unanswered).insert(id);
    }

    pub(crate) fn late_unanswered(&self) -> u64 {
        lock(&self.late_unanswered).len() as u64
    }

    pub(crate) fn handled(&self, id: ItemId) {
        lock(&self.handled).insert(id);
    }

    pub(crate) fn enqueued_count(&self) -> u64 {
        lock(&self.enqueued).len() as u64
    }

    pub(crate) fn acked_unique(&self) -> u64 {
        self.acked_unique.load(Ordering::Relaxed)
    }

    pub(crate) fn count(&self, c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    /// The verdict, given the ids found Dead and still queued at the end.
    ///
    /// An item can leave a queue only by an ack (or a purge, which the demo
    /// does only at the end). A crash can cut off the reply to an ack that
    /// the backend carried out; such an item is gone, unconfirmed, and its
    /// handler had finished, or its late ack went unanswered. An item that
    /// is gone although no handler ever finished it and no late ack of it
    /// may have landed is lost.
    pub(crate) fn verdict(
        &self,
        dead: &HashSet<ItemId>,
        remaining: &HashSet<ItemId>,
        stats: QueueStats,
    ) -> Verdict {
        let enqueued = lock(&self.enqueued);
        let acked = lock(&self.acked);
        let handled = lock(&self.handled);
        let late_unanswered = lock(&self.late_unanswered);
        let may_be_acked = |id: &ItemId| handled.contains(id) || late_unanswered.contains(id);
        let mut latencies: Vec<Duration> = acked
            .iter()
            .filter_map(|(id, (_, at))| enqueued.get(id).map(|e| at.saturating_duration_since(*e)))
            .collect();
        latencies.sort_unstable();
        let gone = || {
            enqueued.keys().filter(|id| {
                !acked.contains_key(id) && !dead.contains(id) && !remaining.contains(id)
            })
        };
        let mut unconfirmed = gone().filter(|id| may_be_acked(id)).count() as u64;
        let mut lost = gone().filter(|id| !may_be_acked(id)).count() as u64;
        // A peek lists at most MAX_PEEK items: when it could not list every
        // item still in the queue, count instead of comparing id sets.
        let left = stats.total() - stats.dead;
        if (remaining.len() as u64) < left || (dead.len() as u64) < stats.dead {
            let known = acked.len() as u64 + stats.dead + left;
            let gone_n = (enqueued.len() as u64).saturating_sub(known);
            unconfirmed = unconfirmed.min(gone_n);
            lost = gone_n - unconfirmed;
        }
        Verdict {
            enqueued: enqueued.len() as u64,
            acked: acked.len() as u64 + unconfirmed,
            unconfirmed,
            acked_twice: acked.values().filter(|(n, _)| *n > 1).count() as u64,
            unexpected: acked.keys().filter(|id| !enqueued.contains_key(id)).count() as u64,
            acked_and_dead: acked.keys().filter(|id| dead.contains(id)).count() as u64,
            lost,
            dead: stats.dead.max(dead.len() as u64),
            left_in_queue: stats.total() - stats.dead,
            latencies,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The counts that decide whether the run passed.
#[derive(Debug)]
pub(crate) struct Verdict {
    pub(crate) enqueued: u64,
    pub(crate) acked: u64,
    /// Acks the backend carried out whose reply a crash cut off or lost.
    pub(crate) unconfirmed: u64,
    pub(crate) acked_twice: u64,
    pub(crate) unexpected: u64,
    pub(crate) acked_and_dead: u64,
    pub(crate) lost: u64,
    pub(crate) dead: u64,
    pub(crate) left_in_queue: u64,
    /// Enqueue-to-ack times, sorted.
    pub(crate) latencies: Vec<Duration>,
}

impl Verdict {
    /// Every item acked or dead, exactly once, and nothing left behind.
    pub(crate) fn passed(&self, expected: u64) -> bool {
        self.enqueued == expected
            && self.acked_twice == 0
            && self.unexpected == 0
            && self.acked_and_dead == 0
            && self.lost == 0
            && self.acked + self.dead == self.enqueued
            && self.left_in_queue == 0
    }

    /// The `p`-th percentile (0 to 100) of the latencies.
    pub(crate) fn percentile(&self, p: f64) -> Option<Duration> {
        if self.latencies.is_empty() {
            return None;
        }
        let rank = ((p / 100.0) * (self.latencies.len() - 1) as f64).round() as usize;
        self.latencies
            .get(rank.min(self.latencies.len() - 1))
            .copied()
    }
}
