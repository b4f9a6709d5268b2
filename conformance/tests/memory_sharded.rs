//! The conformance suite on logical queues sharded 4 ways over the memory
//! backend with the core's `Sharded` layer, on a manual clock. Checks that
//! need one global claim order skip, chosen by the suite from
//! `Capabilities::order`.

use std::sync::Arc;

use leaseq_conformance::{BackendFactory, TestBackend, Unavailable};
use leaseq_core::layer::shard::Sharded;
use leaseq_core::ManualClock;
use leaseq_memory::MemoryBackend;

/// A fresh sharded memory backend per check.
struct ShardedMemoryFactory;

#[leaseq_core::async_trait]
impl BackendFactory for ShardedMemoryFactory {
    fn name(&self) -> &str {
        "memory sharded"
    }

    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let clock = ManualClock::new();
        let backend = MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks();
        let sharded = Sharded::new(backend, 4).map_err(|e| Unavailable(e.to_string()))?;
        Ok(TestBackend::manual(Arc::new(sharded), clock))
    }
}

leaseq_conformance::suite!(ShardedMemoryFactory);
