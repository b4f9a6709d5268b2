//! The History group: a queue's kept finished items live in its state,
//! beside its items, so an ending is recorded in the same critical section
//! as the ack or cancel that makes it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use leaseq_core::finished::check_result;
use leaseq_core::limits::MAX_PEEK;
use leaseq_core::signal::{Signal, SignalHub};
use leaseq_core::{
    async_trait, Bytes, Ending, Error, Finished, History, ItemId, LeaseKey, QueueName, Result,
    Retention, Timestamp,
};

use crate::backend::MemoryBackend;
use crate::state::{Fence, Item};

/// One queue's kept items and its retention policy.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    pub(crate) policy: Retention,
    records: HashMap<u64, Finished>,
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
        item: &Item,
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
            last_error: item.last_error.as_deref().map(str::to_owned),
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
    fn trim(&mut self, ending: Ending, max: Option<u64>) -> u64 {
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
    fn list(&self, ending: Option<Ending>, limit: usize) -> Vec<Finished> {
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

#[async_trait]
impl History for MemoryBackend {
    async fn set_retention(&self, queue: &QueueName, retention: Retention) -> Result<()> {
        retention.check()?;
        self.ensure(queue, |q| {
            let mut st = q.lock();
            st.kept.policy = retention;
            // A smaller count trims at once; ages wait for `collect`.
            for ending in Ending::ALL {
                st.kept.trim(ending, retention.of(ending).max_count);
            }
        });
        self.forget_if_idle(queue);
        Ok(())
    }

    async fn retention(&self, queue: &QueueName) -> Result<Retention> {
        Ok(self
            .existing(queue, |q| q.lock().kept.policy)
            .unwrap_or_default())
    }

    async fn complete(&self, lease: &LeaseKey, result: Bytes) -> Result<()> {
        check_result(&result)?;
        let id = lease.id.get();
        let lost = || Error::LeaseLost { id: lease.id };
        let done = self.existing(&lease.queue, |q| {
            let mut st = q.lock();
            let now = self.now_ms();
            match st.fence(id, lease.token) {
                Fence::Held(item, expires) => {
                    if item.cancel_requested {
                        st.cancel_leased(id, expires, now);
                    } else {
                        st.complete_leased(id, expires, now, Some(result));
                    }
                    st.finished.record(id, lease.token, now);
                    Ok(())
                }
                Fence::Lost => Err(lost()),
            }
        });
        self.forget_if_idle(&lease.queue);
        done.unwrap_or_else(|| Err(lost()))
    }

    async fn finished(
        &self,
        queue: &QueueName,
        ending: Option<Ending>,
        limit: usize,
    ) -> Result<Vec<Finished>> {
        let limit = limit.min(MAX_PEEK);
        Ok(self
            .existing(queue, |q| q.lock().kept.list(ending, limit))
            .unwrap_or_default())
    }

    async fn finished_item(&self, queue: &QueueName, id: ItemId) -> Result<Finished> {
        self.existing(queue, |q| q.lock().kept.records.get(&id.get()).cloned())
            .flatten()
            .ok_or(Error::NotFound { id })
    }

    async fn collect(&self, queue: &QueueName) -> Result<u64> {
        let now = self.now_ms();
        let gone = self
            .existing(queue, |q| q.lock().kept.collect(now))
            .unwrap_or(0);
        if gone > 0 {
            self.forget_if_idle(queue);
        }
        Ok(gone)
    }

    /// In-process: a handle and its clones share one hub.
    async fn finished_signal(&self, queue: &QueueName) -> Result<Signal> {
        Ok(self.shared.finishes.subscribe(queue.as_str()))
    }
}
