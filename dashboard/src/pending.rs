// Stand-ins until the listing and redrive-one operations land in the core.
use leaseq_core::{Backend, Error, ItemId, QueueName, Result};

#[async_trait::async_trait]
pub(crate) trait Pending {
    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool>;
}

#[async_trait::async_trait]
impl Pending for std::sync::Arc<dyn Backend> {
    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        let _ = id;
        self.redrive(queue, 1)
            .await
            .map(|n| n > 0)
            .map_err(|e: Error| e)
    }
}
