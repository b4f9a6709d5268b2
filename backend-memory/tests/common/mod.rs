//! Shared setup for the backend's tests: a backend on a manual clock.

#![allow(dead_code, unreachable_pub)]

use leaseq_core::BackendExt as _;
use std::sync::Arc;
use std::time::Duration;

use leaseq_core::{Backend, ClaimSpec, Lease, ManualClock, NewItem, QueueName};
use leaseq_memory::MemoryBackend;

/// A backend on a manual clock, the clock, and a queue.
pub struct Fixture {
    pub backend: MemoryBackend,
    pub clock: ManualClock,
    pub queue: QueueName,
}

pub fn fixture() -> Fixture {
    let clock = ManualClock::new();
    Fixture {
        backend: MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks(),
        clock,
        queue: QueueName::new("jobs").expect("valid name"),
    }
}

pub const TTL: Duration = Duration::from_secs(30);

pub fn spec(max: u32) -> ClaimSpec {
    ClaimSpec::new(max, TTL).expect("valid spec")
}

impl Fixture {
    pub async fn push(&self, items: Vec<NewItem>) -> Vec<u64> {
        let out = self
            .backend
            .enqueue(&self.queue, items)
            .await
            .expect("enqueue");
        out.into_iter().map(|e| e.id.get()).collect()
    }

    pub async fn claim(&self, max: u32) -> Vec<Lease> {
        let claimed = self
            .backend
            .claim(&self.queue, spec(max))
            .await
            .expect("claim");
        assert!(
            claimed.repairs.is_empty(),
            "unexpected repairs {:?}",
            claimed.repairs
        );
        claimed.leases
    }

    pub async fn claim_ids(&self, max: u32) -> Vec<u64> {
        self.claim(max).await.iter().map(|l| l.id().get()).collect()
    }

    /// Asserts INV-1 on the raw indexes.
    pub async fn assert_consistent(&self) {
        let hooks = self.backend.test_hooks().expect("hooks");
        let snap = hooks.snapshot(&self.queue).await.expect("snapshot");
        assert!(snap.violations().is_empty(), "{:?}", snap.violations());
    }
}

pub fn items(payloads: &[&'static str]) -> Vec<NewItem> {
    payloads.iter().map(|p| NewItem::new(*p)).collect()
}
