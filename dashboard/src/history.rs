//! The counts the collector sampled, kept in memory and bounded: one ring
//! of samples for all queues together and one per queue, for at most
//! [`MAX_QUEUES`] queues, each ring at most `capacity` samples long.

use std::collections::{BTreeMap, VecDeque};

use leaseq_core::{QueueName, QueueStats};
use serde::Serialize;

/// Queues that get a history of their own; later ones get none until a
/// tracked queue has stayed empty for a whole window and its ring is
/// dropped. Bounds memory whatever the number of queues.
pub(crate) const MAX_QUEUES: usize = 100;

/// One queue's counts at a tick, and its completions since the last one
/// (`None`: no completion counter on this backend, or its first tick).
pub(crate) type Counts = (QueueName, QueueStats, Option<u32>);

/// One moment's counts, on the backend's clock. 48 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Sample {
    pub(crate) t_ms: u64,
    pub(crate) ready: u64,
    pub(crate) scheduled: u64,
    pub(crate) leased: u64,
    pub(crate) dead: u64,
    /// Items completed since the previous sample, from the completion
    /// counters; `None` when no queue in it has one yet.
    pub(crate) completed: Option<u32>,
}

impl Sample {
    fn new(t_ms: u64, s: &QueueStats, completed: Option<u32>) -> Self {
        Self {
            t_ms,
            ready: s.ready,
            scheduled: s.scheduled,
            leased: s.leased,
            dead: s.dead,
            completed,
        }
    }

    fn is_empty(&self) -> bool {
        self.ready + self.scheduled + self.leased + self.dead == 0
    }

    fn add(&mut self, s: &QueueStats, completed: Option<u32>) {
        self.ready += s.ready;
        self.scheduled += s.scheduled;
        self.leased += s.leased;
        self.dead += s.dead;
        if let Some(n) = completed {
            self.completed = Some(self.completed.unwrap_or(0).saturating_add(n));
        }
    }
}

/// At most `capacity` samples, the oldest dropped first.
#[derive(Debug)]
struct Ring {
    samples: VecDeque<Sample>,
}

impl Ring {
    fn new(capacity: usize) -> Self {
        Self {
            samples: VecDeque::with_capacity(capacity),
        }
    }

    fn push(&mut self, sample: Sample, capacity: usize) {
        while self.samples.len() >= capacity {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
    }

    /// The samples taken after `t_ms`, oldest first.
    fn after(&self, t_ms: Option<u64>) -> Vec<Sample> {
        let from = t_ms.map_or(0, |t| self.samples.partition_point(|s| s.t_ms <= t));
        self.samples.range(from..).copied().collect()
    }

    fn all_empty(&self) -> bool {
        self.samples.iter().all(Sample::is_empty)
    }
}

/// Every ring, and how long each may grow.
#[derive(Debug)]
pub(crate) struct History {
    capacity: usize,
    total: Ring,
    queues: BTreeMap<QueueName, Ring>,
}

impl History {
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            capacity,
            total: Ring::new(capacity),
            queues: BTreeMap::new(),
        }
    }

    /// Records one tick: every listed queue's counts at `t_ms`. A tracked
    /// queue not listed holds nothing now and records zeros, until its
    /// whole window is zeros and its ring goes.
    pub(crate) fn record(&mut self, t_ms: u64, listed: &[Counts]) {
        // A clock that stepped back would unsort the rings, which `after`
        // relies on: such a tick is dropped.
        if self.total.samples.back().is_some_and(|s| s.t_ms >= t_ms) {
            return;
        }
        let mut total = Sample::new(t_ms, &QueueStats::default(), None);
        for (name, stats, completed) in listed {
            total.add(stats, *completed);
            if !self.queues.contains_key(name) && self.queues.len() < MAX_QUEUES {
                self.queues.insert(name.clone(), Ring::new(self.capacity));
            }
            if let Some(ring) = self.queues.get_mut(name) {
                ring.push(Sample::new(t_ms, stats, *completed), self.capacity);
            }
        }
        let capacity = self.capacity;
        let listed_now = |name: &QueueName| listed.iter().any(|(n, _, _)| n == name);
        self.queues.retain(|name, ring| {
            if listed_now(name) {
                return true;
            }
            ring.push(Sample::new(t_ms, &QueueStats::default(), None), capacity);
            !ring.all_empty()
        });
        self.total.push(total, self.capacity);
    }

    /// The samples after `t_ms` of one queue (`None` when it has no ring:
    /// never sampled, or past [`MAX_QUEUES`]) or of all queues together.
    pub(crate) fn after(
        &self,
        queue: Option<&QueueName>,
        t_ms: Option<u64>,
    ) -> Option<Vec<Sample>> {
        match queue {
            None => Some(self.total.after(t_ms)),
            Some(q) => self.queues.get(q).map(|r| r.after(t_ms)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(ready: u64) -> QueueStats {
        QueueStats {
            ready,
            ..QueueStats::default()
        }
    }

    fn q(name: &str) -> QueueName {
        QueueName::new(name).expect("name")
    }

    #[test]
    fn a_ring_keeps_the_newest_samples_up_to_its_capacity() {
        let mut h = History::new(3);
        for t in 1..=5 {
            h.record(t, &[(q("a"), stats(t), None)]);
        }
        let all = h.after(None, None).expect("total");
        assert_eq!(all.iter().map(|s| s.t_ms).collect::<Vec<_>>(), [3, 4, 5]);
        let a = h.after(Some(&q("a")), None).expect("a");
        assert_eq!(a.iter().map(|s| s.ready).collect::<Vec<_>>(), [3, 4, 5]);
        let since = h.after(None, Some(3)).expect("total");
        assert_eq!(since.iter().map(|s| s.t_ms).collect::<Vec<_>>(), [4, 5]);
    }

    #[test]
    fn the_total_sums_every_queue_and_a_clock_step_back_is_dropped() {
        let mut h = History::new(10);
        h.record(10, &[(q("a"), stats(2), None), (q("b"), stats(3), None)]);
        h.record(9, &[(q("a"), stats(7), None)]);
        let all = h.after(None, None).expect("total");
        assert_eq!(all.len(), 1);
        assert_eq!((all[0].t_ms, all[0].ready), (10, 5));
    }

    #[test]
    fn a_queue_gone_records_zeros_until_its_window_is_empty() {
        let mut h = History::new(2);
        h.record(1, &[(q("a"), stats(4), None)]);
        h.record(2, &[]);
        let a = h.after(Some(&q("a")), None).expect("still kept");
        assert_eq!(a.iter().map(|s| s.ready).collect::<Vec<_>>(), [4, 0]);
        h.record(3, &[]);
        assert!(
            h.after(Some(&q("a")), None).is_none(),
            "dropped when all zero"
        );
    }

    #[test]
    fn the_total_counts_completions_of_the_queues_that_have_a_counter() {
        let mut h = History::new(4);
        h.record(1, &[(q("a"), stats(0), None), (q("b"), stats(1), None)]);
        h.record(2, &[(q("a"), stats(0), Some(3)), (q("b"), stats(1), None)]);
        h.record(
            3,
            &[(q("a"), stats(0), Some(0)), (q("c"), stats(0), Some(4))],
        );
        let all = h.after(None, None).expect("total");
        let counted: Vec<_> = all.iter().map(|s| s.completed).collect();
        assert_eq!(counted, [None, Some(3), Some(4)]);
        let b = h.after(Some(&q("b")), None).expect("b");
        assert!(b.iter().all(|s| s.completed.is_none()), "no counter: {b:?}");
        assert_eq!(std::mem::size_of::<Sample>(), 48);
    }

    #[test]
    fn only_max_queues_get_a_ring_of_their_own() {
        let mut h = History::new(4);
        let listed: Vec<_> = (0..MAX_QUEUES + 5)
            .map(|i| (q(&format!("q{i:04}")), stats(1), None))
            .collect();
        h.record(1, &listed);
        assert_eq!(h.queues.len(), MAX_QUEUES);
        assert!(h.after(Some(&listed[MAX_QUEUES].0), None).is_none());
        // The total still counts the untracked ones.
        let all = h.after(None, None).expect("total");
        assert_eq!(all[0].ready, (MAX_QUEUES + 5) as u64);
    }
}
