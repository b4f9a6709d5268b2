//! [`leaseq_core::Admin::delete_queue`] on Redis. A queue's keys all live
//! in its slot, but the id floor that keeps a deleted queue's ids from
//! coming back lives next to the registry of queues (another slot), so the
//! delete is a short protocol, each step one script:
//! 1. purge batches empty the indexes (as [`leaseq_core::Admin::purge`]);
//! 2. `queue_delete` with the floor the client has raised: it deletes the
//!    items that came in since (a batch; more: purge again), refuses while
//!    the queue handed out ids above the floor (raise the floor past its
//!    last id, with headroom for ids handed out meanwhile, and try again),
//!    else deletes every key of the queue and raises its prune generation
//!    on a tombstone that expires (see [`crate::listing`]);
//! 3. the registry's field is dropped if it still holds the token the
//!    queue was listed under, or the token it held before step 2 (the
//!    loser's of two first enqueues at once, which `listed` never held); a
//!    registration made since keeps it. Step 2 raises the generation, as a
//!    listing's prune does, so this is the listing's argument
//!    ([`crate::listing`]): an item written after step 2 needed a token
//!    written after it, never one of these two.
//!
//! Ids: an enqueue into a queue with no id counter starts above the floor
//! its registration read. The floor covers every id the queue handed out
//! before step 2 ran, and an enqueue after step 2 needs a registration of
//! the new generation, made after the floor was raised.
//!
//! What is left: the generation tombstone, until it expires
//! ([`crate::listing::GENERATION_TOMBSTONE`]), and `enqueue_once` records,
//! which expire on their own after [`REQUEST_MEMORY`], with the queue's
//! last id at the delete (`{prefix:queue}:seq:deleted`) for as long: a
//! resend whose record names only ids up to it was sent before the delete
//! and is written again, as a new request. The registry and its floor are
//! one key each per prefix.

use leaseq_core::limits::REQUEST_MEMORY;
use leaseq_core::{Error, QueueName, Result};

use crate::scripts::arg;
use crate::{RedisBackend, ScriptClient};

/// Items (per index) one purge script deletes.
const PURGE_BATCH: usize = 500;
/// Ids above a queue's last one the floor is first raised by.
const FLOOR_HEADROOM: u64 = 1_000;
/// Rounds of purge and delete before giving up on a queue that keeps
/// receiving items.
const MAX_ROUNDS: usize = 16;

impl<C: ScriptClient> RedisBackend<C> {
    /// [`leaseq_core::Admin::purge`]: batches until every index is empty.
    pub(crate) async fn purge_items(&self, queue: &QueueName) -> Result<u64> {
        let mut deleted = 0u64;
        loop {
            let r = self
                .run(&self.scripts.purge, queue, vec![arg(PURGE_BATCH)])
                .await?;
            let f = r.tuple(2)?;
            deleted += f[0].uint()?;
            if f[1].int()? != 1 {
                return Ok(deleted);
            }
        }
    }

    /// [`leaseq_core::Admin::delete_queue`]: see the [module docs](self).
    pub(crate) async fn delete(&self, queue: &QueueName) -> Result<u64> {
        let limits = self.keys(queue)?.limits();
        let tombstone = crate::listing::GENERATION_TOMBSTONE.as_millis();
        let mut deleted = 0;
        let mut floor = 0;
        // Ids a queue that keeps receiving items hands out between raising
        // the floor and the delete: doubled each time the floor falls short.
        let mut headroom = FLOOR_HEADROOM;
        let registered = self
            .on_registry(
                &self.scripts.queues_registry,
                vec![arg("get"), arg(queue.as_str())],
            )
            .await?
            .bytes()?;
        for _ in 0..MAX_ROUNDS {
            deleted += self.purge_items(queue).await?;
            let r = self
                .run_with_keys(
                    &self.scripts.queue_delete,
                    queue,
                    vec![limits.clone()],
                    vec![
                        arg(floor),
                        arg(tombstone),
                        arg(PURGE_BATCH),
                        arg(REQUEST_MEMORY.as_millis()),
                    ],
                )
                .await?;
            let answer = r.array()?;
            let (Some(n), Some(what)) = (answer.first(), answer.get(1)) else {
                return Err(bad_answer(queue));
            };
            deleted += n.uint()?;
            match what.text()?.as_str() {
                "busy" => {}
                "behind" => {
                    let last = answer.get(2).ok_or_else(|| bad_answer(queue))?.uint()?;
                    let want = last.saturating_add(headroom);
                    headroom = headroom.saturating_mul(2);
                    let raised = self
                        .on_registry(&self.scripts.queues_registry, vec![arg("raise"), arg(want)])
                        .await?;
                    floor = raised.uint()?;
                }
                "deleted" => {
                    let listed = answer.get(2).ok_or_else(|| bad_answer(queue))?.bytes()?;
                    let mut args = vec![arg("drop")];
                    for token in [listed, registered].into_iter().filter(|t| !t.is_empty()) {
                        args.extend([arg(queue.as_str()), token]);
                    }
                    if args.len() > 1 {
                        self.on_registry(&self.scripts.queues_registry, args)
                            .await?;
                    }
                    return Ok(deleted);
                }
                _ => return Err(bad_answer(queue)),
            }
        }
        Err(Error::unavailable(
            format!("redis delete_queue on queue {queue}"),
            format!(
                "items kept coming in through {MAX_ROUNDS} rounds of purge; {deleted} were deleted, the queue is still there"
            ),
        ))
    }
}

fn bad_answer(queue: &QueueName) -> Error {
    Error::Corrupt {
        what: format!("redis queue_delete on queue {queue} gave an answer it never gives"),
    }
}
