//! The whole suite against the memory backend with every group but the
//! operator actions (`Admin`): the checks of the core and of the other
//! groups must run, and pass, on a backend that cannot purge, redrive or
//! remove (before, seven failed here on a purge between steps). What it
//! skips: the checks of `Admin` itself, `clock_follows_real_time` (a
//! manual clock) and `poison_is_quarantined` (memory's hooks plant none).

use std::sync::Arc;

use leaseq_conformance::{BackendFactory, TestBackend, Unavailable};
use leaseq_core::{async_trait, Backend, Groups, LayeredBackend, ManualClock};
use leaseq_memory::MemoryBackend;

/// A backend as `inner`, but without the Admin group.
#[derive(Debug)]
struct WithoutAdmin<B>(B);

#[async_trait]
impl<B: Backend> LayeredBackend for WithoutAdmin<B> {
    type Inner = B;

    fn inner(&self) -> &B {
        &self.0
    }

    fn groups(&self) -> Groups<'_> {
        let mut groups = self.0.groups();
        groups.admin = None;
        groups
    }
}

/// A fresh store per check (nothing could clean a queue), on a clock the
/// suite advances.
struct NoAdminFactory;

#[async_trait]
impl BackendFactory for NoAdminFactory {
    fn name(&self) -> &str {
        "memory without Admin"
    }

    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let clock = ManualClock::new();
        let backend = MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks();
        Ok(TestBackend::manual(Arc::new(WithoutAdmin(backend)), clock))
    }
}

leaseq_conformance::suite!(NoAdminFactory);
