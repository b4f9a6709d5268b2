//! The whole suite against the memory backend on the system clock, as a
//! server backend runs it: real time, short leases, waits on conditions;
//! once with test hooks and once without (checks that need them skip).

use std::sync::Arc;

use leaseq_conformance::{BackendFactory, TestBackend, Unavailable};
use leaseq_core::SystemClock;
use leaseq_memory::MemoryBackend;

/// A fresh memory backend per check, on the wall clock, hooks optional.
struct RealClockFactory {
    hooks: bool,
}

#[leaseq_core::async_trait]
impl BackendFactory for RealClockFactory {
    fn name(&self) -> &str {
        if self.hooks {
            "memory-real-clock"
        } else {
            "memory-real-clock-no-hooks"
        }
    }

    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let backend = MemoryBackend::with_clock(Arc::new(SystemClock));
        if self.hooks {
            return Ok(TestBackend::real(Arc::new(backend.with_test_hooks())));
        }
        Ok(TestBackend::real(Arc::new(backend)))
    }
}

mod with_hooks {
    use super::RealClockFactory;
    leaseq_conformance::suite!(RealClockFactory { hooks: true });
}

mod without_hooks {
    use super::RealClockFactory;
    leaseq_conformance::suite!(RealClockFactory { hooks: false });
}
