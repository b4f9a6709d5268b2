//! Acks in batches: finished jobs hand their lease to one task per worker,
//! which sends whatever has queued up as one [`crate::Backend::ack_many`].
//!
//! There is no timer: a lone ack goes out at once, and a batch forms only
//! while an earlier one is on its way (under load). Each lease's own result
//! goes back to the job that sent it, so outcomes stay per lease.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit};

use super::shared::Shared;
use super::slots::GATHER_TURNS;
use crate::limits::MAX_ACK_BATCH;
use crate::settle::Held;
use crate::spans;
use crate::Error;
use tracing::Instrument;

/// How one lease's ack ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AckResult {
    /// The item is gone: the work is done.
    Acked,
    /// The lease was no longer current; nothing changed. `vanished`: the
    /// store lost it ([`Error::LeaseVanished`]).
    LeaseLost {
        /// The store lost the lease; no reaper or worker took it.
        vanished: bool,
    },
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

/// One lease waiting to be acked, and where its result goes.
#[derive(Debug)]
pub(crate) struct Pending {
    lease: Held,
    reply: oneshot::Sender<AckResult>,
    /// The job's lease room, held until the batch is answered (dropped
    /// with the rest of its batch).
    _room: OwnedSemaphorePermit,
}

/// The jobs' side of the batcher; clones share one batcher.
#[derive(Debug, Clone)]
pub(crate) struct Acker(mpsc::UnboundedSender<Pending>);

impl Acker {
    /// A handle, and the queue its batcher (see [`run`]) drains.
    pub(crate) fn channel() -> (Acker, mpsc::UnboundedReceiver<Pending>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Acker(tx), rx)
    }

    /// Acks `key` in the next batch and waits for its own result.
    pub(crate) async fn ack(&self, lease: Held, room: OwnedSemaphorePermit) -> AckResult {
        let (reply, result) = oneshot::channel();
        if self
            .0
            .send(Pending {
                lease,
                reply,
                _room: room,
            })
            .is_err()
        {
            return stopped();
        }
        result.await.unwrap_or_else(|_| stopped())
    }
}

fn stopped() -> AckResult {
    AckResult::Failed("the worker's ack batcher has stopped".into())
}

/// Sends the queued leases as batches of at most
/// [`MAX_ACK_BATCH`] until every [`Acker`] is gone and the queue is empty.
pub(crate) async fn run(shared: Arc<Shared>, mut queue: mpsc::UnboundedReceiver<Pending>) {
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
        let leases: Vec<Held> = batch.iter().map(|p| p.lease.clone()).collect();
        let results = ack_batch(&shared, &leases).await;
        // Each pending's lease room is dropped with it, all in this one
        // turn: the next claim finds the whole batch's room free.
        for (pending, result) in batch.drain(..).zip(results) {
            // A job that went away (a hard stop) no longer wants its result.
            let _ = pending.reply.send(result);
        }
    }
}

/// One result per lease, in order. A batch whose reply was lost is settled
/// lease by lease ([`crate::settle::Settle::ack_many`]): an ack that landed
/// reports `Acked`, never `LeaseLost`.
async fn ack_batch(shared: &Shared, keys: &[Held]) -> Vec<AckResult> {
    let span = spans::ack_batch(&shared.queue, keys.len());
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
