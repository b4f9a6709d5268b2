//! Converting queues from key layout 1 (the crate docs, "Upgrading").

use leaseq_core::{QueueName, Result};

use crate::scripts::arg;
use crate::{RedisBackend, ScriptClient};

/// Entries of each layout 1 index one script converts.
const BATCH: u64 = 500;

impl<C: ScriptClient> RedisBackend<C> {
    /// Converts `queue` from key layout 1 to this layout, in batches of at
    /// most 500 entries per index, each one script (see the crate docs,
    /// "Upgrading"); returns how many items it moved. A queue in this
    /// layout answers 0 and is left as it is. Safe to run again after an
    /// interruption: a batch is converted whole or not at all.
    pub async fn migrate_layout1(&self, queue: &QueueName) -> Result<u64> {
        let marker = format!("{}layout1:migrating", self.keys(queue)?.key_prefix());
        let mut moved = 0;
        loop {
            let r = self
                .run_with_keys(
                    &self.scripts.migrate,
                    queue,
                    vec![marker.clone()],
                    vec![arg(BATCH)],
                )
                .await?;
            let f = r.tuple(2)?;
            moved += f[0].uint()?;
            if f[1].uint()? == 0 {
                if moved > 0 {
                    tracing::info!(queue = %queue, items = moved, "leaseq-redis: queue converted to key layout 2");
                }
                return Ok(moved);
            }
        }
    }

    /// [`RedisBackend::migrate_layout1`] for every queue in the registry of
    /// queues (under this backend's prefix): the queues and the items each
    /// moved.
    pub async fn migrate_layout1_all(&self) -> Result<Vec<(QueueName, u64)>> {
        let mut out = Vec::new();
        for queue in self.registered_queues().await? {
            let moved = self.migrate_layout1(&queue).await?;
            out.push((queue, moved));
        }
        Ok(out)
    }
}
