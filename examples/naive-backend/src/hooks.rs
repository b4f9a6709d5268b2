//! The test hooks the conformance suite plants stale and corrupt states
//! with, on when the backend is built `with_test_hooks`.

use std::cmp::Reverse;

use leaseq_core::{
    async_trait, IndexSnapshot, ItemId, ItemState, QueueName, Result, TestHooks, Timestamp,
};

use crate::{Bug, NaiveBackend};

#[async_trait]
impl TestHooks for NaiveBackend {
    async fn expire_leases(&self, queue: &QueueName) -> Result<u64> {
        let mut st = self.lock();
        let now = self.clock_now();
        let Some(q) = st.queues.get_mut(queue) else {
            return Ok(0);
        };
        let every = self.bug() == Bug::ExpireHookTouchesExpired;
        let touched: Vec<(Timestamp, u64)> = q
            .leased
            .keys()
            .filter(|(at, _)| every || *at > now)
            .copied()
            .collect();
        for (at, id) in &touched {
            q.leased.remove(&(*at, *id));
            q.leased.insert((now, *id), ());
            if let Some(i) = q.items.get_mut(id) {
                i.due = Some(now);
            }
        }
        Ok(touched.len() as u64)
    }

    async fn make_due(&self, queue: &QueueName) -> Result<u64> {
        let mut st = self.lock();
        let now = self.clock_now();
        let Some(q) = st.queues.get_mut(queue) else {
            return Ok(0);
        };
        let due: Vec<(Timestamp, u64)> = q.scheduled.keys().copied().collect();
        for (at, id) in &due {
            q.scheduled.remove(&(*at, *id));
            q.scheduled.insert((now, *id), ());
            if let Some(i) = q.items.get_mut(id) {
                i.due = Some(now);
            }
        }
        Ok(due.len() as u64)
    }

    async fn plant_dangling_ready(&self, queue: &QueueName, id: ItemId) -> Result<()> {
        let mut st = self.lock();
        let q = st.queues.entry(queue.clone()).or_default();
        q.ready.insert((Reverse(i32::MAX), id.get()), id.get());
        Ok(())
    }

    async fn snapshot(&self, queue: &QueueName) -> Result<IndexSnapshot> {
        let st = self.lock();
        let mut snap = IndexSnapshot::default();
        if let Some(q) = st.queues.get(queue) {
            for state in ItemState::ALL {
                let ids = q.index(state).into_iter().map(ItemId::new).collect();
                snap.indexes.insert(state, ids);
            }
            snap.items = q.items.keys().copied().map(ItemId::new).collect();
        }
        Ok(snap)
    }

    fn steps(&self, queue: &QueueName) -> Option<u64> {
        self.steps.get(queue)
    }
}
