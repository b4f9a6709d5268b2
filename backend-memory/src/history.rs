//! The History group on the memory backend: a queue's kept finished items
//! ([`crate::kept::Kept`]) live in its state, beside its items, so an
//! ending is recorded in the same critical section as the ack or cancel
//! that makes it.

use leaseq_core::finished::check_result;
use leaseq_core::limits::MAX_PEEK;
use leaseq_core::signal::Signal;
use leaseq_core::{
    async_trait, Bytes, Ending, Error, Finished, History, ItemId, LeaseKey, QueueName, Result,
    Retention,
};

use crate::backend::MemoryBackend;
use crate::state::Fence;

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
            .existing(queue, |q| {
                let mut st = q.lock();
                let dead = st.kept.policy.dead;
                st.kept.collect(now) + st.collect_dead(dead, now)
            })
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
