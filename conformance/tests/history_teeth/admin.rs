//! The faulty wrapper's Admin group: the backend's, or with the seeded
//! fault.

use async_trait::async_trait;
use leaseq_core::events::{EventKind, JobEvent};
use leaseq_core::limits::MAX_PEEK;
use leaseq_core::{Admin, Backend, BackendExt, Error, ItemId, ItemState, QueueName, Result};

use super::faulty::{lock, Fault, Faulty};

#[async_trait]
impl Admin for Faulty {
    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        self.inner.admin()?.redrive(queue, limit).await
    }

    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        let moved = self.inner.admin()?.redrive_item(queue, id).await?;
        if moved {
            match self.fault {
                Fault::RedrivenStillDead => {
                    lock(&self.redriven)
                        .entry(queue.clone())
                        .or_default()
                        .push(id);
                }
                Fault::EventsForAdmin => self
                    .hub
                    .publish(queue.as_str(), || JobEvent::new(id, EventKind::Enqueued)),
                _ => {}
            }
        }
        Ok(moved)
    }

    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState> {
        let was = self.inner.admin()?.remove_item(queue, id).await?;
        if self.fault == Fault::EventsForAdmin {
            self.hub
                .publish(queue.as_str(), || JobEvent::new(id, EventKind::Cancelled));
        }
        Ok(was)
    }

    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        let admin = self.inner.admin()?;
        match self.fault {
            Fault::PurgeKeepsHistory => purge_one_by_one(self.inner.as_ref(), queue).await,
            Fault::PurgeResetsCount => {
                let gone = admin.purge(queue).await?;
                let count = self.inner.stats(queue).await?.completed.unwrap_or(0);
                lock(&self.count_at_purge).insert(queue.clone(), count);
                Ok(gone)
            }
            _ => admin.purge(queue).await,
        }
    }

    async fn delete_queue(&self, queue: &QueueName) -> Result<u64> {
        let gone = self.inner.admin()?.delete_queue(queue).await?;
        self.forget(queue);
        Ok(gone)
    }
}

/// Removes every item of `queue` in every state, one by one: what is kept
/// stays (PurgeKeepsHistory).
async fn purge_one_by_one(inner: &dyn Backend, queue: &QueueName) -> Result<u64> {
    let admin = inner.admin()?;
    let mut gone = 0;
    for state in [
        ItemState::Ready,
        ItemState::Scheduled,
        ItemState::Leased,
        ItemState::Dead,
    ] {
        loop {
            let items = inner.peek(queue, state, MAX_PEEK).await?;
            if items.is_empty() {
                break;
            }
            for item in items {
                match admin.remove_item(queue, item.id).await {
                    Ok(_) => gone += 1,
                    Err(Error::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(gone)
}
