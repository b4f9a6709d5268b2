//! The optional groups' operations called by name on a backend handle, for
//! the checks' own brevity: each answers `Error::Unsupported` naming the
//! group when the backend lacks it. Checks declare the groups they need
//! (`Needs`), so a backend without one skips them before any call here.

use leaseq_core::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use leaseq_core::{
    async_trait, Backend, BackendExt, ItemId, ItemState, NewItem, QueueLimits, QueueName, Result,
};

/// Group operations on any backend handle.
#[async_trait]
pub(crate) trait Groupwise: Backend {
    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        self.admin()?.redrive(queue, limit).await
    }
    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        self.admin()?.redrive_item(queue, id).await
    }
    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState> {
        self.admin()?.remove_item(queue, id).await
    }
    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        self.admin()?.purge(queue).await
    }
    async fn delete_queue(&self, queue: &QueueName) -> Result<u64> {
        self.admin()?.delete_queue(queue).await
    }
    async fn set_queue_limits(&self, queue: &QueueName, limits: QueueLimits) -> Result<()> {
        self.throttles()?.set_queue_limits(queue, limits).await
    }
    async fn queue_limits(&self, queue: &QueueName) -> Result<QueueLimits> {
        self.throttles()?.queue_limits(queue).await
    }
    async fn put_schedule(&self, schedule: &Schedule) -> Result<StoredSchedule> {
        self.schedule_store()?.put_schedule(schedule).await
    }
    async fn remove_schedule(&self, name: &ScheduleName) -> Result<bool> {
        self.schedule_store()?.remove_schedule(name).await
    }
    async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        self.schedule_store()?.schedules().await
    }
    async fn fire_schedule(&self, tick: &ScheduleTick, item: NewItem) -> Result<Fired> {
        self.schedule_store()?.fire_schedule(tick, item).await
    }
}

impl<B: Backend + ?Sized> Groupwise for B {}
