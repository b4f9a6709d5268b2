//! The completions the collector charts: each queue's completion counter
//! ([`QueueStats::completed`]) read at every tick, as the difference from
//! the tick before. A backend without the counter (no History group) has
//! none to chart, and the page says so instead of guessing.

use std::collections::HashMap;

use leaseq_core::{QueueName, QueueStats};

/// Each queue's counter at the last tick.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    last: HashMap<QueueName, u64>,
}

impl Counters {
    /// `queue`'s completions since the last tick that read its counter;
    /// `None` without a counter, or at the first reading (nothing to
    /// compare with yet). A counter that went back (the queue was deleted
    /// and made again) counts from 0.
    pub(crate) fn since_last(&mut self, queue: &QueueName, stats: &QueueStats) -> Option<u32> {
        let Some(now) = stats.completed else {
            self.last.remove(queue);
            return None;
        };
        let before = self.last.insert(queue.clone(), now)?;
        let done = if now >= before { now - before } else { now };
        Some(u32::try_from(done).unwrap_or(u32::MAX))
    }

    /// Forgets the queues not in `keep`, so the map stays as small as the
    /// set of queues sampled.
    pub(crate) fn retain(&mut self, keep: impl Fn(&QueueName) -> bool) {
        self.last.retain(|q, _| keep(q));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(completed: Option<u64>) -> QueueStats {
        QueueStats {
            completed,
            ..QueueStats::default()
        }
    }

    #[test]
    fn completions_are_the_counter_s_rise_between_ticks() {
        let q = QueueName::new("q").unwrap();
        let mut c = Counters::default();
        assert_eq!(c.since_last(&q, &stats(Some(10))), None, "first reading");
        assert_eq!(c.since_last(&q, &stats(Some(15))), Some(5));
        assert_eq!(c.since_last(&q, &stats(Some(15))), Some(0));
        assert_eq!(c.since_last(&q, &stats(Some(3))), Some(3), "made again");
        assert_eq!(c.since_last(&q, &stats(None)), None, "no counter");
        c.retain(|_| false);
        assert_eq!(c.since_last(&q, &stats(Some(7))), None, "forgotten");
    }
}
