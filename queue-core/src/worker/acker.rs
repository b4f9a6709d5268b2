//! Acks in batches: finished jobs hand their lease to one task per worker,
//! which sends whatever has queued up as one [`crate::Backend::ack_many`].
//!
//! There is no timer: a lone ack goes out at once, and a batch forms only
//! while an earlier one is on its way (under load). The batcher also
//! finishes each job by its own lease's result (counters, event, span), so
//! a job whose handler succeeded ends at the hand-over, and outcomes stay
//! per lease.

use std::sync::Arc;

use tokio::sync::{mpsc, OwnedSemaphorePermit};

use super::ending::JobTag;
use super::metrics::Counter;
use super::shared::Shared;
use super::slots::GATHER_TURNS;
use crate::limits::MAX_ACK_BATCH;
use crate::settle::Held;
use crate::spans;
use crate::Error;
use tracing::Instrument;

/// How one lease's ack ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum AckResult {
    /// The item is gone: the work is done.
    Acked,
    /// The lease was no longer current; nothing changed. `vanished`: the
    /// store lost it ([`Error::LeaseVanished`]).
    LeaseLost { vanished: bool },
    /// The ack could not be recorded (the backend failed); the text says
    /// why. The lease will expire and a reaper will recover the item.
    Failed(String),
}

impl AckResult {
    fn from_error(e: &Error) -> Self {
        if e.is_lease_lost() {
            AckResult::LeaseLost {
                vanished: e.is_lease_vanished(),
            }
        } else {
            AckResult::Failed(e.to_string())
        }
    }
}

/// A job whose handler succeeded, handed over to be acked and finished.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) lease: Held,
    pub(crate) tag: JobTag,
    /// The job's lease room, held until the batch is answered (dropped
    /// with the rest of its batch).
    pub(crate) _room: OwnedSemaphorePermit,
}

impl Finished {
    fn ended(self, shared: &Shared, result: AckResult) {
        match result {
            AckResult::Acked => self.tag.acked(shared),
            AckResult::LeaseLost { vanished } => self.tag.lost_before_recording(shared, vanished),
            AckResult::Failed(error) => self.tag.not_recorded(shared, error),
        }
    }
}

/// The jobs' side of the batcher; clones share one batcher.
#[derive(Debug, Clone)]
pub(crate) struct Acker(mpsc::UnboundedSender<Finished>);

impl Acker {
    /// A handle, and the queue its batcher (see [`run`]) drains.
    pub(crate) fn channel() -> (Acker, mpsc::UnboundedReceiver<Finished>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Acker(tx), rx)
    }

    /// Acks the job's lease in the next batch; the batcher tells how it
    /// ended. Never waits: the job is over for its handler slot and task.
    pub(crate) fn finish(&self, shared: &Shared, job: Finished) {
        if let Err(mpsc::error::SendError(job)) = self.0.send(job) {
            job.ended(shared, stopped());
        }
    }
}

fn stopped() -> AckResult {
    AckResult::Failed("the worker's ack batcher has stopped".into())
}

/// Sends the queued leases as batches of at most
/// [`MAX_ACK_BATCH`] until every [`Acker`] is gone and the queue is empty.
pub(crate) async fn run(shared: Arc<Shared>, mut queue: mpsc::UnboundedReceiver<Finished>) {
    let limit = MAX_ACK_BATCH;
    let mut batch = Vec::with_capacity(limit);
    while queue.recv_many(&mut batch, limit).await > 0 {
        // Jobs finishing right now join within a scheduler turn or two; a
        // turn with nothing new ends the wait.
        for _ in 0..GATHER_TURNS {
            if batch.len() >= limit {
                break;
            }
            tokio::task::yield_now().await;
            let before = batch.len();
            while batch.len() < limit {
                match queue.try_recv() {
                    Ok(p) => batch.push(p),
                    Err(_) => break,
                }
            }
            if batch.len() == before {
                break;
            }
        }
        let leases: Vec<Held> = batch.iter().map(|f| f.lease.clone()).collect();
        let results = ack_batch(&shared, &leases).await;
        let acked = results.iter().filter(|r| **r == AckResult::Acked).count();
        shared.metrics.add(Counter::Acked, acked as u64);
        // Each job's lease room is dropped with it, all in this one turn:
        // the next claim finds the whole batch's room free.
        for (job, result) in batch.drain(..).zip(results) {
            job.ended(&shared, result);
        }
    }
}

/// One result per lease, in order. A batch whose reply was lost is settled
/// lease by lease ([`crate::settle::Settle::ack_many`]): an ack that landed
/// reports `Acked`, never `LeaseLost`.
async fn ack_batch(shared: &Shared, keys: &[Held]) -> Vec<AckResult> {
    let span = spans::ack_batch(&shared.span_names, &shared.queue, keys.len());
    let acked = shared
        .settle
        .ack_many(shared.backend.as_ref(), keys)
        .instrument(span.clone())
        .await;
    match spans::outcome(&span, acked) {
        Ok(results) if results.len() == keys.len() => results
            .iter()
            .map(|r| match r {
                Ok(()) => AckResult::Acked,
                Err(e) => AckResult::from_error(e),
            })
            .collect(),
        Ok(results) => {
            let text = format!(
                "the backend answered an ack of {} leases with {} results",
                keys.len(),
                results.len()
            );
            tracing::error!(queue = %shared.queue, "{text}");
            vec![AckResult::Failed(text); keys.len()]
        }
        Err(e) => {
            tracing::error!(queue = %shared.queue, leases = keys.len(), error = %e, "could not ack a batch");
            // The outer error is a backend failure, never one lease's.
            vec![AckResult::Failed(e.to_string()); keys.len()]
        }
    }
}
