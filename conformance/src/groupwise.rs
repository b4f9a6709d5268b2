//! The optional groups' operations called by name on a backend handle, for
//! the checks' own brevity: each answers `Error::Unsupported` naming the
//! group when the backend lacks it. Checks declare the groups they need
//! (`Needs`), so a backend without one skips them before any call here.

use leaseq_core::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use std::time::Duration;

use leaseq_core::{
    async_trait, Backend, BackendExt, Bytes, Cancelled, ItemId, ItemState, LeaseKey, NewItem,
    QueueLimits, QueueName, Released, Result,
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
    async fn complete(&self, lease: &LeaseKey, result: Bytes) -> Result<()> {
        self.history()?.complete(lease, result).await
    }
    async fn finished(
        &self,
        queue: &QueueName,
        ending: Option<leaseq_core::Ending>,
        limit: usize,
    ) -> Result<Vec<leaseq_core::Finished>> {
        self.history()?.finished(queue, ending, limit).await
    }
    async fn cancel(&self, queue: &QueueName, id: ItemId) -> Result<Cancelled> {
        self.control()?.cancel(queue, id).await
    }
    async fn pause(&self, queue: &QueueName) -> Result<()> {
        self.control()?.pause(queue).await
    }
    async fn resume(&self, queue: &QueueName) -> Result<()> {
        self.control()?.resume(queue).await
    }
    async fn is_paused(&self, queue: &QueueName) -> Result<bool> {
        self.control()?.is_paused(queue).await
    }
    async fn snooze(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        self.control()?.snooze(lease, delay).await
    }
    async fn run_now(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        self.control()?.run_now(queue, id).await
    }
    async fn run_all_now(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        self.control()?.run_all_now(queue, limit).await
    }
    async fn progress(&self, lease: &LeaseKey, value: Bytes) -> Result<()> {
        self.control()?.progress(lease, value).await
    }
}

impl<B: Backend + ?Sized> Groupwise for B {}
