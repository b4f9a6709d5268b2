//! A storm's operator: on a backend handle of its own, at random, it
//! cancels recent items by id (Ready, Scheduled, Leased and Dead ones) and
//! pauses and resumes the queue, recording every answer in the ledger. It
//! leaves the queue resumed when it stops.

use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq_core::{Backend, BackendExt as _, CancellationToken, QueueName};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};

use crate::ledger::Ledger;

/// How an operator acts.
#[derive(Debug, Clone)]
pub struct OperatorConfig {
    /// Time between two acts.
    pub every: Duration,
    /// One act in this many pauses or resumes the queue; the others cancel.
    pub pause_one_in: u64,
    /// The longest a pause lasts (it is resumed at the next act after this
    /// at the latest).
    pub longest_pause: Duration,
    /// Seeds the operator's choices.
    pub seed: u64,
}

impl Default for OperatorConfig {
    fn default() -> Self {
        OperatorConfig {
            every: Duration::from_millis(10),
            pause_one_in: 25,
            longest_pause: Duration::from_millis(300),
            seed: 0x5eed_0f1e,
        }
    }
}

/// The operator's task; see [`run`].
#[derive(Debug)]
pub struct Operator {
    /// Its own handle, as an operator's tool would have.
    pub backend: Arc<dyn Backend>,
    /// The storm's queue.
    pub queue: QueueName,
    /// The storm's ledger.
    pub ledger: Arc<Ledger>,
    /// How it acts.
    pub config: OperatorConfig,
    /// Stops it.
    pub stop: CancellationToken,
}

/// Acts until `op.stop`, then resumes the queue (retrying until the resume
/// is answered Ok, for up to a minute). `Err` when the backend offers no
/// Control group or the final resume never went through.
pub async fn run(op: Operator) -> Result<(), String> {
    let control = op.backend.control().map_err(|e| e.to_string())?;
    // Seeded, so a failing storm's choices can be replayed.
    let mut rng = StdRng::seed_from_u64(op.config.seed);
    let mut paused_at: Option<Instant> = None;
    while !op.stop.is_cancelled() {
        let r: u64 = rng.random();
        let overdue = paused_at.is_some_and(|t| t.elapsed() >= op.config.longest_pause);
        if overdue || r.is_multiple_of(op.config.pause_one_in.max(1)) {
            if paused_at.is_some() {
                if control.resume(&op.queue).await.is_ok() {
                    op.ledger.resumed();
                    paused_at = None;
                }
            } else if control.pause(&op.queue).await.is_ok() {
                op.ledger.paused();
                paused_at = Some(Instant::now());
            }
        } else if let Some(id) = op.ledger.pick(r >> 8) {
            op.ledger.cancel_asked(id);
            let answer = control.cancel(&op.queue, id).await;
            op.ledger.cancel_answered(id, &answer);
        }
        tokio::select! {
            _ = op.stop.cancelled() => {}
            _ = tokio::time::sleep(op.config.every) => {}
        }
    }
    let start = Instant::now();
    loop {
        match control.resume(&op.queue).await {
            Ok(()) => {
                if paused_at.is_some() {
                    op.ledger.resumed();
                }
                return Ok(());
            }
            Err(e) if start.elapsed() > Duration::from_secs(60) => {
                return Err(format!("the final resume failed: {e}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
