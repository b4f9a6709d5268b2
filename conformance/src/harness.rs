//! What a backend author provides to run the suite: a factory of backends
//! and a way to let time pass.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::{Backend, ManualClock};

/// How a check lets time pass on the backend's clock.
#[derive(Debug, Clone)]
pub enum TimeControl {
    /// The backend reads this clock: the suite advances it.
    Manual(ManualClock),
    /// The backend reads a real clock (a server's): the suite sleeps.
    Real,
}

/// One backend handed to one check.
#[derive(Debug, Clone)]
pub struct TestBackend {
    /// The backend under test.
    pub backend: Arc<dyn Backend>,
    /// How time passes for it.
    pub time: TimeControl,
}

impl TestBackend {
    /// A backend whose clock the suite advances.
    pub fn manual(backend: Arc<dyn Backend>, clock: ManualClock) -> Self {
        TestBackend {
            backend,
            time: TimeControl::Manual(clock),
        }
    }

    /// A backend on a real clock (a server's).
    pub fn real(backend: Arc<dyn Backend>) -> Self {
        TestBackend {
            backend,
            time: TimeControl::Real,
        }
    }

    /// Lets `d` pass on the backend's clock.
    pub async fn pass_time(&self, d: Duration) {
        match &self.time {
            TimeControl::Manual(clock) => clock.advance(d),
            TimeControl::Real => tokio::time::sleep(d).await,
        }
    }

    /// True when the suite controls the backend's clock.
    pub fn is_manual(&self) -> bool {
        matches!(self.time, TimeControl::Manual(_))
    }
}

/// Why a factory could not produce a backend (e.g. no server reachable).
#[derive(Debug, Clone)]
pub struct Unavailable(pub String);

/// Hands each check a backend. Checks isolate themselves by using a fresh,
/// unique queue name each, so many checks may share one server or one
/// backend; they purge their queues when done.
#[async_trait]
pub trait BackendFactory: Send + Sync + 'static {
    /// A short name for output, e.g. `"memory"` or `"redis-rs"`.
    fn name(&self) -> &str;

    /// A backend for one check, or why none can be had. The runner turns
    /// `Unavailable` into a loud skip, or a failure when `CI=true`.
    async fn backend(&self) -> Result<TestBackend, Unavailable>;
}

/// The repetition factor for race checks: `LEASEQ_CONFORMANCE_SCALE`
/// (a whole number, default 1, at most 1,000). Race checks multiply their
/// rounds and storm sizes by it.
pub fn scale() -> u32 {
    std::env::var("LEASEQ_CONFORMANCE_SCALE")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .map(|n| n.clamp(1, 1_000))
        .unwrap_or(1)
}
