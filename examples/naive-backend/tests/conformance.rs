//! The whole conformance suite, and its reference model, against the naive
//! backend without a bug: the one macro call the suite's docs promise.

use std::sync::Arc;

use leaseq_conformance::{BackendFactory, TestBackend, Unavailable};
use leaseq_core::ManualClock;
use leaseq_example_naive::{Bug, NaiveBackend};

/// A fresh backend per check, on a clock the suite advances.
struct NaiveFactory;

#[leaseq_core::async_trait]
impl BackendFactory for NaiveFactory {
    fn name(&self) -> &str {
        "naive"
    }

    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let clock = ManualClock::new();
        // The core tier alone: the suite skips the checks of every optional
        // group (operator actions, throttles, schedules, test hooks) and says so.
        let backend = NaiveBackend::new(Arc::new(clock.clone()), Bug::None);
        Ok(TestBackend::manual(Arc::new(backend), clock))
    }
}

leaseq_conformance::suite!(NaiveFactory);
