//! The whole conformance suite against the memory backend, on a manual clock.

use std::sync::Arc;

use leaseq_conformance::{BackendFactory, TestBackend, Unavailable};
use leaseq_core::ManualClock;
use leaseq_memory::MemoryBackend;

/// A fresh memory backend per check, on a clock the suite advances.
struct MemoryFactory;

#[leaseq_core::async_trait]
impl BackendFactory for MemoryFactory {
    fn name(&self) -> &str {
        "memory"
    }

    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let clock = ManualClock::new();
        let backend = MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks();
        Ok(TestBackend::manual(Arc::new(backend), clock))
    }
}

leaseq_conformance::suite!(MemoryFactory);
