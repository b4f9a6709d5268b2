//! [`leaseq_core::Backend::queues`] on Redis: a registry of queues,
//! without `KEYS` or `SCAN`, valid on Redis Cluster.
//!
//! | key | type | holds |
//! |-----|------|-------|
//! | `{p:_}:queues` | hash | the registry: queue → the token of its latest registration |
//! | `{p:q}:listed` | string | present while `q` is registered: the token its registration wrote |
//! | `{p:q}:listgen` | string | how many times a listing found `q` empty and took it out (its prune generation) |
//!
//! A script runs in one slot, so no enqueue script can write the registry
//! (it lives in the slot of the `_` pseudo queue, like the index of
//! schedules). The protocol:
//! - Every script that creates items (`enqueue`, `enqueue_once`,
//!   `schedule_fire`) first checks `listed`. Present: it goes on as
//!   always (no extra round trip). Missing: unless the call carries a
//!   registration of the current generation it writes nothing and answers
//!   `unregistered` with the generation; the client then writes a fresh
//!   token R into the registry and sends the script again with (R,
//!   generation), and the script sets `listed = R` and writes the batch.
//! - `queues` reads the whole registry, then runs `queue_prune` in each
//!   queue's slot: it counts the queue's index entries and, at zero,
//!   deletes `listed` and raises the generation. For each queue found
//!   empty it then deletes the registry's field, only if the field still
//!   holds the token the registry read returned. The queues counted above
//!   zero are the answer.
//!
//! Why no queue that holds an item is ever hidden: the registry field of
//! `q` is deleted only when it still holds a token T that was written
//! before the prune that found `q` empty (the registry was read first). An
//! item in `q` when the delete runs came after that prune, so the first
//! script to write an item after it found `listed` missing and needed a
//! registration of the generation the prune set: a token written to the
//! registry after the prune. Written before the delete, it replaced T
//! (tokens are never reused) and the field is kept; written after it, the
//! field is back before the item is. The generation is what makes this
//! hold: without it a client that registered, stalled while another
//! registered over it, filled and emptied the queue, and then wrote its
//! batch just after the prune, would have items behind a field holding the
//! other client's token, the one the delete removes.
//!
//! And no phantom: a queue is answered only when its count, read in its
//! own slot during the call, was above zero.
//!
//! A queue whose items were all written by a version without the listing
//! has no `listed` key and no registry field: it is listed from its next
//! enqueue on (which registers it), and never before.
//!
//! Registry fields of queues whose registration lost a race (two first
//! enqueues at once, each writing its token) are dropped like any other
//! by the first listing that finds the queue empty.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::join_all;
use leaseq_core::{Error, LeaseToken, NewItem, QueueName, Result};

use crate::ops::batch_args;
use crate::scripts::arg;
use crate::{RedisBackend, Reply, Script, ScriptClient};

/// The queue whose hash tag the registry carries (shared with the index of
/// schedules).
const REGISTRY_QUEUE: &str = "_";
/// Prune scripts in flight at once during a listing.
const PRUNES_IN_FLIGHT: usize = 64;
/// Registry fields dropped per script call.
const DROP_BATCH: usize = 256;
/// Registrations one enqueue makes before it gives up: each one after the
/// first means a listing found the queue empty in between (it had no item
/// yet) and took the registration back.
const MAX_REGISTRATIONS: usize = 8;

/// How long an enqueue may use a registration: a deleted queue's prune
/// generation is a tombstone that lives [`GENERATION_TOMBSTONE`], and a
/// registration older than that might match the generation the queue
/// falls back to once it is gone.
const REGISTRATION_LIFETIME: Duration = Duration::from_secs(30);
/// How long the prune generation a delete raises is kept (see
/// `scripts/queue_delete.lua`).
pub(crate) const GENERATION_TOMBSTONE: Duration = Duration::from_secs(120);

/// A registration: the token written to the registry, the prune generation
/// it was written in, the registry's id floor it read (where a queue with
/// no id counter starts), and when it was made.
#[derive(Debug, Clone)]
struct Registration {
    token: LeaseToken,
    generation: Bytes,
    floor: u64,
    made: Instant,
}

/// The generation of an `unregistered` answer, or `None` for any other.
fn unregistered(r: &Reply) -> Result<Option<Bytes>> {
    match r {
        Reply::Array(a) if a.len() == 2 && a[0] == Reply::Data(Bytes::from("unregistered")) => {
            Ok(Some(a[1].bytes()?))
        }
        _ => Ok(None),
    }
}

/// The enqueue arguments: the registration (empty when none), then the
/// batch (see `scripts/enqueue_batch.lua`).
fn enqueue_args(
    registration: Option<&Registration>,
    floor: u64,
    items: &[NewItem],
    args: &mut Vec<Bytes>,
) {
    match registration {
        Some(r) => {
            args.push(arg(r.token));
            args.push(r.generation.clone());
            args.push(arg(r.floor));
        }
        None => {
            args.push(Bytes::new());
            args.push(Bytes::new());
            args.push(arg(0));
        }
    }
    batch_args(floor, items, args);
}

impl<C: ScriptClient> RedisBackend<C> {
    /// The pseudo queue whose hash tag the store-wide keys carry (the
    /// registries of queues and of workers, the index of schedules).
    pub(crate) fn registry_queue() -> Result<QueueName> {
        QueueName::new(REGISTRY_QUEUE)
    }

    /// The key of the registry of queues: a hash, queue → the token of its
    /// latest registration, in the slot of the `_` pseudo queue, under
    /// this backend's prefix.
    pub fn queue_registry_key(&self) -> Result<String> {
        Ok(format!(
            "{}:queues",
            self.keys(&Self::registry_queue()?)?.tag()
        ))
    }

    /// The key of the registry's id floor: the highest id any deleted queue
    /// handed out (a string), next to the registry. A queue with no id
    /// counter starts above it, so a deleted queue's ids are never reused.
    pub fn id_floor_key(&self) -> Result<String> {
        Ok(format!(
            "{}:idfloor",
            self.keys(&Self::registry_queue()?)?.tag()
        ))
    }

    pub(crate) async fn on_registry(&self, script: &Script, args: Vec<Bytes>) -> Result<Reply> {
        let keys = vec![self.queue_registry_key()?, self.id_floor_key()?];
        self.run_with_keys(script, &Self::registry_queue()?, keys, args)
            .await
    }

    /// Writes a fresh token for `queue` into the registry. A failure says
    /// nothing was enqueued, whatever became of the registry's field (a
    /// field with no items behind it is dropped by the next listing).
    async fn register(&self, queue: &QueueName, generation: Bytes) -> Result<Registration> {
        let token = LeaseToken::random();
        let made = Instant::now();
        let args = vec![arg(queue.as_str()), arg(token)];
        match self.on_registry(&self.scripts.queues_register, args).await {
            Ok(floor) => Ok(Registration {
                token,
                generation,
                floor: floor.uint()?,
                made,
            }),
            Err(
                e @ (Error::Full { .. }
                | Error::Corrupt { .. }
                | Error::Unavailable { .. }
                | Error::Rejected { .. }),
            ) => Err(e),
            Err(e) => Err(Error::unavailable(
                format!(
                    "redis: registering queue {queue} before its first item; nothing was enqueued"
                ),
                e,
            )),
        }
    }

    /// Runs an item-creating script (`script` with `extra` keys and `head`
    /// arguments before the batch of `items`), registering the queue when
    /// the script asks for it; returns the script's other answer.
    pub(crate) async fn run_registered(
        &self,
        script: &Script,
        queue: &QueueName,
        extra: Vec<String>,
        head: &[Bytes],
        items: &[NewItem],
    ) -> Result<Reply> {
        let mut registration: Option<Registration> = None;
        for _ in 0..=MAX_REGISTRATIONS {
            // A stale registration is sent as none: the script then asks
            // for a fresh one.
            registration.take_if(|r| r.made.elapsed() > REGISTRATION_LIFETIME);
            let mut args = head.to_vec();
            enqueue_args(
                registration.as_ref(),
                self.floors.get(queue),
                items,
                &mut args,
            );
            let r = self
                .run_with_keys(script, queue, extra.clone(), args)
                .await?;
            let Some(generation) = unregistered(&r)? else {
                return Ok(r);
            };
            registration = Some(self.register(queue, generation).await?);
        }
        Err(Error::unavailable(
            format!("redis {} on queue {queue}", script.name()),
            format!(
                "listings took the queue's registration back {MAX_REGISTRATIONS} times before its first item was written; nothing was enqueued"
            ),
        ))
    }

    /// The queues in the registry, each with the token it was registered
    /// under; a malformed field is skipped with a warning.
    async fn registry(&self) -> Result<Vec<(QueueName, Bytes)>> {
        let all = self
            .on_registry(&self.scripts.queues_registry, vec![arg("all")])
            .await?;
        let fields = all.array()?;
        let mut registered: Vec<(QueueName, Bytes)> = Vec::with_capacity(fields.len() / 2);
        for pair in fields.chunks(2) {
            let [queue, token] = pair else {
                return Err(Error::Corrupt {
                    what: "the registry of queues answered an odd number of fields".into(),
                });
            };
            match queue.text().and_then(QueueName::new) {
                Ok(q) => registered.push((q, token.bytes()?)),
                Err(e) => tracing::warn!(field = ?queue, error = %e,
                    "leaseq-redis: skipping a malformed field of the registry of queues"),
            }
        }
        Ok(registered)
    }

    /// The queues in the registry, as registered (none counted or pruned).
    pub(crate) async fn registered_queues(&self) -> Result<Vec<QueueName>> {
        Ok(self.registry().await?.into_iter().map(|(q, _)| q).collect())
    }

    /// [`leaseq_core::Backend::queues`]: see the [module docs](self).
    pub(crate) async fn list_queues(&self) -> Result<Vec<QueueName>> {
        let registered = self.registry().await?;
        // Concurrent calls share the client's connections as pipelines, per
        // node on a cluster.
        let mut counts = Vec::with_capacity(registered.len());
        for batch in registered.chunks(PRUNES_IN_FLIGHT) {
            let mut calls = Vec::with_capacity(batch.len());
            for (queue, _) in batch {
                calls.push(self.run(&self.scripts.queue_prune, queue, Vec::new()));
            }
            counts.extend(join_all(calls).await);
        }
        let mut listed = Vec::new();
        let mut dropped = Vec::new();
        for ((queue, token), count) in registered.into_iter().zip(counts) {
            if count?.uint()? > 0 {
                listed.push(queue);
            } else {
                dropped.push(Bytes::from(queue.as_str().to_owned()));
                dropped.push(token);
            }
        }
        for batch in dropped.chunks(2 * DROP_BATCH) {
            let mut args = Vec::with_capacity(1 + batch.len());
            args.push(arg("drop"));
            args.extend_from_slice(batch);
            self.on_registry(&self.scripts.queues_registry, args)
                .await?;
        }
        listed.sort();
        Ok(listed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_unregistered_answer_asks_for_a_registration() {
        let asks = Reply::Array(vec![
            Reply::Data(Bytes::from("unregistered")),
            Reply::Data(Bytes::from("3")),
        ]);
        assert_eq!(unregistered(&asks).ok(), Some(Some(Bytes::from("3"))));
        for other in [
            Reply::Array(vec![Reply::Array(vec![]), Reply::Nil]),
            Reply::Array(vec![Reply::Data(Bytes::from("fired")), Reply::Nil]),
            Reply::Array(vec![Reply::Int(0), Reply::Array(vec![]), Reply::Nil]),
            Reply::Nil,
        ] {
            assert_eq!(unregistered(&other).ok(), Some(None), "{other:?}");
        }
    }
}
