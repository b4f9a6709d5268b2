//! One queue's kept finished items and its retention policy (the History
//! group's state), with the indexes that make trimming and collecting cost
//! what they remove.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use leaseq_core::signal::SignalHub;
use leaseq_core::{Bytes, Ending, Finished, ItemId, QueueName, Retention, Timestamp};

/// What a kept record takes from the item that ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ended<'a> {
    pub(crate) payload: &'a Bytes,
    pub(crate) enqueued_at: u64,
    pub(crate) attempts: u32,
    pub(crate) last_error: Option<&'a str>,
}

/// One queue's kept items and its retention policy.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    pub(crate) policy: Retention,
    pub(crate) records: HashMap<u64, Finished>,
    /// Per ending ([`Ending::ALL`] order): (finished at ms, id), oldest
    /// first, so collection walks only what it removes.
    order: [BTreeSet<(u64, u64)>; 2],
    /// Where endings are announced ([`History::finished_signal`]): the
    /// backend's hub and this queue's name; set when the queue is made.
    pub(crate) announce: Option<(Arc<SignalHub>, QueueName)>,
}

fn slot(ending: Ending) -> usize {
    match ending {
        Ending::Completed => 0,
        Ending::Cancelled => 1,
    }
}

impl Kept {
    /// Records `item` (id `id`) as ended at `now`, if the policy keeps
    /// that ending; trims to the policy's count at once.
    pub(crate) fn record(
        &mut self,
        id: u64,
        item: Ended<'_>,
        ending: Ending,
        now: u64,
        result: Option<Bytes>,
    ) {
        let keep = self.policy.of(ending);
        if !keep.keeps_any() {
            return;
        }
        let record = Finished {
            id: ItemId::new(id),
            ending,
            finished_at: Timestamp::from_millis(now),
            enqueued_at: Timestamp::from_millis(item.enqueued_at),
            attempts: item.attempts,
            payload: item.payload.clone(),
            last_error: item.last_error.map(str::to_owned),
            result: result.filter(|_| ending == Ending::Completed),
        };
        self.records.insert(id, record);
        self.order[slot(ending)].insert((now, id));
        self.trim(ending, keep.max_count);
        if let Some((hub, queue)) = &self.announce {
            hub.fire(queue.as_str());
        }
    }

    /// Drops the oldest of `ending` beyond `max`; answers how many.
    pub(crate) fn trim(&mut self, ending: Ending, max: Option<u64>) -> u64 {
        let Some(max) = max else { return 0 };
        let order = &mut self.order[slot(ending)];
        let mut gone = 0;
        while order.len() as u64 > max {
            if let Some((_, id)) = order.pop_first() {
                self.records.remove(&id);
                gone += 1;
            }
        }
        gone
    }

    /// Removes what the policy no longer keeps at `now`: the oldest first,
    /// stopping at the first one still kept.
    pub(crate) fn collect(&mut self, now: u64) -> u64 {
        let mut gone = 0;
        for ending in Ending::ALL {
            let keep = self.policy.of(ending);
            gone += self.trim(ending, keep.max_count);
            let Some(age) = keep.max_age else { continue };
            let age = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
            let order = &mut self.order[slot(ending)];
            while let Some(&(at, id)) = order.first() {
                if at.saturating_add(age) > now {
                    break;
                }
                order.pop_first();
                self.records.remove(&id);
                gone += 1;
            }
        }
        gone
    }

    /// Newest first: by finish time, then id, highest first.
    pub(crate) fn list(&self, ending: Option<Ending>, limit: usize) -> Vec<Finished> {
        let mut keys: Vec<(u64, u64)> = Ending::ALL
            .into_iter()
            .filter(|e| ending.is_none_or(|want| want == *e))
            .flat_map(|e| self.order[slot(e)].iter().rev().take(limit).copied())
            .collect();
        keys.sort_unstable_by(|a, b| b.cmp(a));
        keys.truncate(limit);
        keys.into_iter()
            .filter_map(|(_, id)| self.records.get(&id).cloned())
            .collect()
    }

    /// Forgets every kept item (a purge); the policy stays.
    pub(crate) fn clear(&mut self) {
        self.records.clear();
        self.order = Default::default();
    }

    /// Nothing kept and the default policy: the queue may be forgotten.
    pub(crate) fn is_empty(&self) -> bool {
        self.records.is_empty() && self.policy == Retention::default()
    }
}
