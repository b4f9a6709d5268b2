//! [`History`] on Redis: a queue's retention policy and kept finished items
//! live in its slot beside its items (the keys `retention`, `done`,
//! `done:completed`, `done:cancelled` and `ends`, see
//! [`crate::KeyLayout`]).
//!
//! - Every script that ends an item (ack, `ack_many`, release, give back,
//!   fail, snooze, reap, cancel) reads the policy with one `HMGET` of the
//!   `retention` hash and keeps the item in the same script; a queue that
//!   keeps nothing has no such key, and `ack_many`'s fast path pays nothing
//!   more than one key in an `EXISTS` it already asks.
//! - A kept item is a field of the `done` hash and a member of its
//!   ending's sorted set, scored by its finish time: `collect` reads only
//!   the oldest, so it costs what it removes, and each script is atomic, so
//!   racing collects remove each item once. A count bound trims at each
//!   ending.
//! - Kept records are written even on a server over `maxmemory` (the
//!   scripts that end items run there so consumers keep draining): the
//!   policy bounds them.
//! - The finished signal reads the `ends` stream (see `cancel_feed.rs`),
//!   written only when an ending was kept: an ending in any process fires
//!   it.
//! - Dead letters are bounded by [`Retention::dead`], in `retention:dead`
//!   apart from the `retention` hash (so the ack paths read nothing more),
//!   and aged by the time of death each death records in `dead:at`; the
//!   crate docs ([Finished items](crate#finished-items)) say how `collect`
//!   removes them, and how the completion counter counts.

use async_trait::async_trait;
use bytes::Bytes;
use leaseq_core::finished::check_result;
use leaseq_core::limits::MAX_PEEK;
use leaseq_core::signal::Signal;
use leaseq_core::{
    Ending, Error, Finished, History, ItemId, Keep, LeaseKey, QueueName, Result, Retention,
    Timestamp,
};

use crate::ops::lease_args;
use crate::scripts::arg;
use crate::{RedisBackend, Reply, ScriptClient};

/// The most kept items one collect script removes.
const COLLECT_BATCH: usize = 1_000;

impl<C: ScriptClient> RedisBackend<C> {
    /// Collect scripts until one finds no more to remove (`mode`: `all`,
    /// or `count` after a policy change).
    async fn collect_in_batches(&self, queue: &QueueName, mode: &str) -> Result<u64> {
        let mut removed = 0;
        loop {
            let r = self
                .run(
                    &self.scripts.collect,
                    queue,
                    vec![arg(COLLECT_BATCH), arg(mode)],
                )
                .await?;
            let f = r.tuple(2)?;
            removed += f[0].uint()?;
            if f[1].int()? != 1 {
                return Ok(removed);
            }
        }
    }
}

#[async_trait]
impl<C: ScriptClient> History for RedisBackend<C> {
    async fn set_retention(&self, queue: &QueueName, retention: Retention) -> Result<()> {
        retention.check()?;
        let args = vec![
            arg("set"),
            arg(stored_bounds(retention.completed)),
            arg(stored_bounds(retention.cancelled)),
            arg(dead_bounds(retention.dead)),
        ];
        self.run(&self.scripts.retention, queue, args).await?;
        // A smaller count trims at once; ages wait for `collect`.
        self.collect_in_batches(queue, "count").await?;
        Ok(())
    }

    async fn retention(&self, queue: &QueueName) -> Result<Retention> {
        let r = self
            .run(&self.scripts.retention, queue, vec![arg("get")])
            .await?;
        let f = r.tuple(3)?;
        Ok(Retention::default()
            .completed(read_bounds(&f[0])?)
            .cancelled(read_bounds(&f[1])?)
            .dead(read_dead_bounds(&f[2])?))
    }

    async fn complete(&self, lease: &LeaseKey, result: Bytes) -> Result<()> {
        check_result(&result)?;
        let mut args = lease_args(lease);
        args.push(result);
        let r = self.run(&self.scripts.ack, &lease.queue, args).await?;
        match r.int()? {
            1 => Ok(()),
            _ => Err(Error::LeaseLost { id: lease.id }),
        }
    }

    async fn finished(
        &self,
        queue: &QueueName,
        ending: Option<Ending>,
        limit: usize,
    ) -> Result<Vec<Finished>> {
        let limit = limit.min(MAX_PEEK);
        let which = ending.map_or("", Ending::as_str);
        let r = self
            .run(
                &self.scripts.finished,
                queue,
                vec![arg("list"), arg(which), arg(limit)],
            )
            .await?;
        r.array()?
            .chunks(2)
            .map(|pair| match pair {
                [id, rec] => record(ItemId::new(id.uint()?), &rec.bytes()?),
                _ => Err(corrupt("an odd-length list")),
            })
            .collect()
    }

    async fn finished_item(&self, queue: &QueueName, id: ItemId) -> Result<Finished> {
        let r = self
            .run(
                &self.scripts.finished,
                queue,
                vec![arg("one"), arg(id.get())],
            )
            .await?;
        match r {
            Reply::Nil => Err(Error::NotFound { id }),
            r => record(id, &r.bytes()?),
        }
    }

    async fn collect(&self, queue: &QueueName) -> Result<u64> {
        self.collect_in_batches(queue, "all").await
    }

    /// Fed from the queue's `ends` stream: an ending kept by any process
    /// fires it.
    async fn finished_signal(&self, queue: &QueueName) -> Result<Signal> {
        self.subscribe_finishes(queue)
    }
}

/// One ending's bounds as the `retention` hash stores them, `age_ms,count`
/// (an empty bound: none); `""` for a policy that keeps nothing.
fn stored_bounds(keep: Keep) -> String {
    if !keep.keeps_any() {
        return String::new();
    }
    bounds_text(keep)
}

/// [`Retention::dead`] as the `retention:dead` key stores it (as
/// [`stored_bounds`]); `""` for [`Keep::FOREVER`], the default, which
/// stores no key.
fn dead_bounds(keep: Keep) -> String {
    if keep == Keep::FOREVER {
        return String::new();
    }
    bounds_text(keep)
}

/// `age_ms,count`, each part empty for no bound.
fn bounds_text(keep: Keep) -> String {
    let age = keep
        .max_age
        .map(|a| a.as_millis().to_string())
        .unwrap_or_default();
    let count = keep.max_count.map(|c| c.to_string()).unwrap_or_default();
    format!("{age},{count}")
}

/// The bounds [`stored_bounds`] wrote (nil: [`Keep::NOTHING`]).
fn read_bounds(r: &Reply) -> Result<Keep> {
    match r.opt_text()? {
        Some(text) => parse_bounds(&text),
        None => Ok(Keep::NOTHING),
    }
}

/// The bounds [`dead_bounds`] wrote (nil: [`Keep::FOREVER`]).
fn read_dead_bounds(r: &Reply) -> Result<Keep> {
    match r.opt_text()? {
        Some(text) => parse_bounds(&text),
        None => Ok(Keep::FOREVER),
    }
}

/// `age_ms,count`, each part empty for no bound.
fn parse_bounds(text: &str) -> Result<Keep> {
    let bad = || corrupt(&format!("the retention bounds {text:?}"));
    let (age, count) = text.split_once(',').ok_or_else(bad)?;
    let num = |s: &str| -> Result<Option<u64>> {
        if s.is_empty() {
            return Ok(None);
        }
        s.parse().map(Some).map_err(|_| bad())
    };
    Ok(Keep {
        max_age: num(age)?.map(std::time::Duration::from_millis),
        max_count: num(count)?,
    })
}

/// A kept record: `ending,finished,enqueued,attempts,elen,rlen,` then the
/// last error, the result and the payload (see [`crate::KeyLayout`]).
fn record(id: ItemId, rec: &Bytes) -> Result<Finished> {
    let bad = || corrupt(&format!("the kept record of item {id}"));
    let mut fields = Vec::with_capacity(6);
    let mut at = 0;
    for _ in 0..6 {
        let comma = rec[at..].iter().position(|&b| b == b',').ok_or_else(bad)?;
        fields.push(std::str::from_utf8(&rec[at..at + comma]).map_err(|_| bad())?);
        at += comma + 1;
    }
    let len = |s: &str| -> Result<Option<usize>> {
        if s.is_empty() {
            return Ok(None);
        }
        s.parse().map(Some).map_err(|_| bad())
    };
    let ending: Ending = fields[0].parse().map_err(|_| bad())?;
    let finished_at = fields[1].parse().map_err(|_| bad())?;
    let enqueued_at = fields[2].parse().map_err(|_| bad())?;
    let attempts = fields[3].parse().map_err(|_| bad())?;
    let (elen, rlen) = (len(fields[4])?, len(fields[5])?);
    let mut take = |n: Option<usize>| -> Result<Option<Bytes>> {
        let Some(n) = n else { return Ok(None) };
        let end = at
            .checked_add(n)
            .filter(|&e| e <= rec.len())
            .ok_or_else(bad)?;
        let part = rec.slice(at..end);
        at = end;
        Ok(Some(part))
    };
    let last_error = take(elen)?
        .map(|e| String::from_utf8(e.to_vec()).map_err(|_| bad()))
        .transpose()?;
    let result = take(rlen)?;
    Ok(Finished {
        id,
        ending,
        finished_at: Timestamp::from_millis(finished_at),
        enqueued_at: Timestamp::from_millis(enqueued_at),
        attempts,
        payload: rec.slice(at..),
        last_error,
        result,
    })
}

fn corrupt(what: &str) -> Error {
    Error::Corrupt {
        what: format!("redis history: {what} is malformed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bounds_round_trip() {
        for keep in [
            Keep::FOREVER,
            Keep::count(3),
            Keep::for_age(Duration::from_secs(60)),
            Keep::for_age(Duration::from_millis(1500)).at_most(7),
        ] {
            let stored = Reply::Data(Bytes::from(stored_bounds(keep)));
            assert_eq!(read_bounds(&stored).ok(), Some(keep));
        }
        assert_eq!(stored_bounds(Keep::NOTHING), "");
        assert_eq!(stored_bounds(Keep::for_age(Duration::ZERO)), "");
        assert_eq!(read_bounds(&Reply::Nil).ok(), Some(Keep::NOTHING));
        for keep in [
            Keep::FOREVER,
            Keep::NOTHING,
            Keep::for_age(Duration::ZERO),
            Keep::count(2),
            Keep::for_age(Duration::from_secs(5)).at_most(9),
        ] {
            let stored = match dead_bounds(keep) {
                text if text.is_empty() => Reply::Nil,
                text => Reply::Data(Bytes::from(text)),
            };
            assert_eq!(read_dead_bounds(&stored).ok(), Some(keep));
        }
        assert!(read_bounds(&Reply::Data(Bytes::from("x"))).is_err());
    }

    #[test]
    fn records_decode_with_binary_parts() {
        let rec = Bytes::from_static(b"completed,20,10,2,4,3,boomr,\x00pay,load");
        let f = record(ItemId::new(5), &rec).expect("decodes");
        assert_eq!(f.ending, Ending::Completed);
        assert_eq!(f.finished_at, Timestamp::from_millis(20));
        assert_eq!(f.enqueued_at, Timestamp::from_millis(10));
        assert_eq!(f.attempts, 2);
        assert_eq!(f.last_error.as_deref(), Some("boom"));
        assert_eq!(f.result.as_deref(), Some(b"r,\x00".as_slice()));
        assert_eq!(f.payload, "pay,load");
        let plain =
            record(ItemId::new(6), &Bytes::from_static(b"cancelled,2,1,0,,,p")).expect("decodes");
        assert_eq!((plain.last_error, plain.result), (None, None));
        assert_eq!(plain.payload, "p");
        for bad in [
            &b"completed,1,1,1,9,,x"[..],
            b"done,1,1,1,,,x",
            b"completed,1,1",
        ] {
            assert!(record(ItemId::new(1), &Bytes::copy_from_slice(bad)).is_err());
        }
    }
}
