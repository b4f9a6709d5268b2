//! [`Control`] on Redis: each operation one script in the queue's slot.
//!
//! - A cancel request is the lease's token in `{p:q}:cancel`
//!   ([`crate::KeyLayout::cancel_requests`]); it counts only while that
//!   token is the item's. Every script that ends a lease (ack, `ack_many`,
//!   release, give back, fail, snooze, reap) reads it in the step that ends
//!   the lease and then deletes the item instead of moving it on; a queue
//!   where no item has one pays one `EXISTS` (nothing at all in
//!   `ack_many`, whose fast path already asks `EXISTS` of other keys).
//! - The pause is the field `paused` of the queue's limits hash
//!   ([`crate::KeyLayout::limits`]), which the claim reads anyway: a claim
//!   on a queue neither limited nor paused finds no key and pays nothing.
//!   Purge keeps the hash, `delete_queue` deletes it.
//! - Progress is the lease's token followed by the value, in
//!   `{p:q}:progress` ([`crate::KeyLayout::progress`]): a read shows it
//!   only while that token is the item's, so a new lease starts with none
//!   and the claim clears nothing.
//! - A snooze is the give-back script with a delay: attempts as before the
//!   lease, never Dead.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use leaseq_core::limits::{check_delay, check_progress, millis_ceil};
use leaseq_core::{Cancelled, Control, Error, ItemId, LeaseKey, QueueName, Released, Result};

use crate::ops::lease_args;
use crate::scripts::arg;
use crate::{decode, RedisBackend, Reply, ScriptClient};

/// Scheduled entries one `run_all_now` script moves.
const RUN_ALL_BATCH: usize = 500;

impl<C: ScriptClient> RedisBackend<C> {
    /// The give-back script with `delay` (zero: back to Ready now), as
    /// `give_back` and `snooze` use it.
    pub(crate) async fn give_back_after(
        &self,
        lease: &LeaseKey,
        delay: Duration,
    ) -> Result<Released> {
        let mut args = lease_args(lease);
        args.push(arg(millis_ceil(delay)));
        let r = self
            .run(&self.scripts.give_back, &lease.queue, args)
            .await?;
        match r.int()? {
            1 => Ok(Released::Ready),
            4 => Ok(Released::Scheduled),
            3 => Ok(Released::Cancelled),
            2 => {
                // Settled all the same: the lease is over, the item is in Dead.
                tracing::warn!(queue = %lease.queue, id = %lease.id,
                    "leaseq-redis: an item given back had unusable fields: quarantined to Dead");
                Ok(Released::Dead)
            }
            _ => Err(Error::LeaseLost { id: lease.id }),
        }
    }

    /// The pause script on `queue` (`mode`: pause, resume or get): whether
    /// the queue is paused after it.
    async fn pause_call(&self, queue: &QueueName, mode: &str) -> Result<bool> {
        let limits = vec![self.keys(queue)?.limits()];
        let r = self
            .run_with_keys(&self.scripts.pause, queue, limits, vec![arg(mode)])
            .await?;
        Ok(r.int()? == 1)
    }
}

#[async_trait]
impl<C: ScriptClient> Control for RedisBackend<C> {
    async fn cancel(&self, queue: &QueueName, id: ItemId) -> Result<Cancelled> {
        let r = self
            .run(&self.scripts.cancel, queue, vec![arg(id.get())])
            .await?;
        let f = r.array()?;
        match f {
            [code, state] if code.int()? == 1 => Ok(Cancelled::Now {
                was: decode::opt_state(state)?.ok_or_else(|| bad_answer("cancel", &r))?,
            }),
            [code] if code.int()? == 2 => Ok(Cancelled::Requested),
            [code] if code.int()? == -1 => Err(Error::NotFound { id }),
            _ => Err(bad_answer("cancel", &r)),
        }
    }

    async fn pause(&self, queue: &QueueName) -> Result<()> {
        self.pause_call(queue, "pause").await.map(|_| ())
    }

    async fn resume(&self, queue: &QueueName) -> Result<()> {
        self.pause_call(queue, "resume").await.map(|_| ())
    }

    async fn is_paused(&self, queue: &QueueName) -> Result<bool> {
        self.pause_call(queue, "get").await
    }

    async fn snooze(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        check_delay(delay)?;
        self.give_back_after(lease, delay).await
    }

    async fn run_now(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        let r = self
            .run(&self.scripts.run_now, queue, vec![arg(id.get())])
            .await?;
        let f = r.tuple(2)?;
        decode::repairs(queue, &f[1])?;
        match f[0].int()? {
            1 => Ok(true),
            0 => Ok(false),
            -1 => Err(Error::NotFound { id }),
            _ => Err(bad_answer("run_now", &r)),
        }
    }

    async fn run_all_now(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        let mut moved = 0u64;
        let mut left = limit;
        while left > 0 {
            let batch = left.min(RUN_ALL_BATCH);
            let r = self
                .run(&self.scripts.run_all_now, queue, vec![arg(batch)])
                .await?;
            let f = r.tuple(3)?;
            let n = f[0].uint()?;
            decode::repairs(queue, &f[2])?;
            moved += n;
            left = left.saturating_sub(usize::try_from(n).unwrap_or(usize::MAX));
            // Fewer entries than asked: no Scheduled item is left to move.
            if f[1].uint()? < batch as u64 {
                break;
            }
        }
        Ok(moved)
    }

    async fn progress(&self, lease: &LeaseKey, value: Bytes) -> Result<()> {
        check_progress(&value)?;
        let mut args = lease_args(lease);
        args.push(value);
        let r = self.run(&self.scripts.progress, &lease.queue, args).await?;
        match r.int()? {
            1 => Ok(()),
            _ => Err(Error::LeaseLost { id: lease.id }),
        }
    }

    /// Fed from the queue's cancel stream: a cancel made by any process
    /// fires it (see `cancel_feed.rs`).
    async fn cancel_signal(&self, queue: &QueueName) -> Result<leaseq_core::signal::Signal> {
        self.subscribe_cancels(queue)
    }
}

fn bad_answer(op: &str, r: &Reply) -> Error {
    Error::Corrupt {
        what: format!("redis {op} answered {r:?}"),
    }
}
