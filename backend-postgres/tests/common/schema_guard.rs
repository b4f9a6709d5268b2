//! A backend that drops its schema when the last handle goes, so a check
//! that only sees `Arc<dyn Backend>` still leaves nothing behind.

use std::time::Duration;

use leaseq_core::{
    async_trait, Backend, Capabilities, ClaimSpec, Claimed, Enqueued, ItemId, ItemInfo, ItemState,
    LeaseKey, LeaseTtl, Limits, NewItem, QueueName, QueueStats, ReapReport, Released, Result,
    TestHooks, Timestamp,
};
use leaseq_postgres::PgBackend;

/// [`PgBackend`] in a schema of its own, dropped on drop.
#[derive(Debug)]
pub struct SchemaGuarded {
    pub inner: PgBackend,
    pub schema: String,
}

impl Drop for SchemaGuarded {
    fn drop(&mut self) {
        super::drop_schema_blocking(self.schema.clone());
    }
}

#[async_trait]
impl Backend for SchemaGuarded {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn limits(&self) -> Limits {
        self.inner.limits()
    }
    async fn now(&self) -> Result<Timestamp> {
        self.inner.now().await
    }
    async fn enqueue(&self, q: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        self.inner.enqueue(q, items).await
    }
    async fn claim(&self, q: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        self.inner.claim(q, spec).await
    }
    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        self.inner.ack(lease).await
    }
    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Timestamp> {
        self.inner.extend(lease, ttl).await
    }
    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        self.inner.release(lease, delay).await
    }
    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        self.inner.fail(lease, reason).await
    }
    async fn reap(&self, q: &QueueName) -> Result<ReapReport> {
        self.inner.reap(q).await
    }
    async fn stats(&self, q: &QueueName) -> Result<QueueStats> {
        self.inner.stats(q).await
    }
    async fn peek(&self, q: &QueueName, state: ItemState, limit: usize) -> Result<Vec<ItemInfo>> {
        self.inner.peek(q, state, limit).await
    }
    async fn item(&self, q: &QueueName, id: ItemId) -> Result<ItemInfo> {
        self.inner.item(q, id).await
    }
    async fn redrive(&self, q: &QueueName, limit: usize) -> Result<u64> {
        self.inner.redrive(q, limit).await
    }
    async fn purge(&self, q: &QueueName) -> Result<u64> {
        self.inner.purge(q).await
    }
    async fn wait_for_work(&self, q: &QueueName, timeout: Duration) {
        self.inner.wait_for_work(q, timeout).await
    }
    fn test_hooks(&self) -> Option<&dyn TestHooks> {
        self.inner.test_hooks()
    }
}
