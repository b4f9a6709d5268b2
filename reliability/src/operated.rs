//! A storm with an operator, shared by the server backends' tests:
//! settled producers, real workers and their reapers, and an operator who
//! cancels items (Ready, Scheduled, Leased and Dead ones) and pauses and
//! resumes the queue at random; then the queue is resumed and drained and
//! the ledger judges it: nothing lost, nothing acked twice, no item
//! delivered after its cancel answered `Now`, every item ended exactly
//! once (acked, Dead or Cancelled).

use std::sync::Arc;
use std::time::Duration;

use leaseq_core::{Backend, QueueName};

use crate::env;
use crate::operator::OperatorConfig;
use crate::storm::{indexes_consistent, Ending, Storm, StormConfig};

/// Handles for an operated storm, each its own connection or pool.
#[derive(Debug)]
pub struct Handles {
    /// One per producer.
    pub producers: Vec<Arc<dyn Backend>>,
    /// One per worker.
    pub workers: Vec<Arc<dyn Backend>>,
    /// The operator's.
    pub operator: Arc<dyn Backend>,
    /// Watches the queue and judges the end.
    pub observer: Arc<dyn Backend>,
}

/// Runs the storm on `queue` for `length` (or `LEASEQ_STORM_SECS`), prints
/// its figures under `name` and fails the test on a wrong ending.
///
/// # Panics
/// When the storm cannot start, does not drain, or the ledger finds an
/// item lost, acked twice, delivered after a `Now`, or ended twice; or the
/// operator never cancelled, paused or resumed.
pub async fn operated_storm(name: &str, h: Handles, queue: QueueName, length: Duration) -> Ending {
    let cfg = StormConfig {
        settled: true,
        variety: true,
        work: Duration::from_millis(10),
        long_work: Duration::from_millis(2_500),
        max_backlog: 400,
        ..StormConfig::default()
    };
    let mut storm =
        Storm::start(h.producers, h.workers, queue.clone(), cfg).expect("workers build");
    storm.operate(h.operator, OperatorConfig::default());
    let length = match env::number("LEASEQ_STORM_SECS", 0) {
        0 => length,
        n => Duration::from_secs(n),
    };
    tokio::time::sleep(length).await;
    storm
        .ledger
        .interim()
        .unwrap_or_else(|e| panic!("{name}, mid-storm: {e}"));
    let failures = storm.failures();
    let end = storm
        .settle(h.observer.as_ref(), Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let (f, c) = (end.figures, end.figures.cancels);
    // Each item once: Dead items a cancel ended later, and Requested items
    // whose handler failed for good (the fail ended them), count as
    // cancelled.
    let verdict = format!(
        "{name} operated storm, {}s: {failures} failed calls; {f}; ended: {} acked + {} dead + \
         {} cancelled + {} unsure + {} lost of {} enqueued",
        length.as_secs(),
        f.acked,
        f.dead as u64 - c.now_dead - c.requested_failed as u64,
        c.now() as usize + c.requested_cancelled + c.requested_reaped + c.requested_failed,
        f.unsure,
        f.lost,
        f.enqueued
    );
    env::loud(&verdict);
    indexes_consistent(h.observer.as_ref(), &queue, Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("{verdict}: {e}"));
    end.assert_nothing_lost(&verdict);
    assert!(
        c.now() > 0 && c.requested > 0 && c.pauses > 0 && c.resumes > 0,
        "{verdict}: the operator did not cancel, pause and resume"
    );
    end
}
