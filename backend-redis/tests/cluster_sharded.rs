//! The conformance suite on a logical queue sharded 4 ways over the local
//! 3-master cluster, each queue's shards placed so they cover all three
//! masters, on fred (redis-rs when fred is not built; `conformance_sharded.rs`
//! runs the layer on redis-rs). A sharded queue keeps order per shard only
//! (`Capabilities::order` is `PerShard`), so the suite itself leaves out the
//! checks that need one global claim order and prints each with the reason.
//! The reference model runs 8 sequences here, not 32: the layer itself is
//! modelled at full length over memory (`conformance/tests/memory_sharded.rs`).

mod common;

use std::sync::Arc;

use common::{ClusterFactory, Which};
use leaseq_core::QueueName;
use leaseq_redis::keys::key_slot;
use leaseq_redis::{ShardNamer, ShardParser};

const SHARDS: u16 = 4;

/// The master (0, 1, 2) a slot has after `redis-cli --cluster create` of
/// three nodes.
fn master_of(slot: u16) -> u16 {
    match slot {
        0..=5460 => 0,
        5461..=10922 => 1,
        _ => 2,
    }
}

/// Names shards `q.s<salt>:i`, with the first salt that puts the four
/// shards on all three masters.
fn spread(prefix: String) -> ShardNamer {
    Arc::new(move |q: &QueueName, i: u16| {
        let name = |salt: u32, i: u16| format!("{q}.s{salt}:{i}");
        let salt = (0..10_000u32)
            .find(|&salt| {
                let mut seen = [false; 3];
                for i in 0..SHARDS {
                    let tag = format!("{{{prefix}:{}}}", name(salt, i));
                    seen[usize::from(master_of(key_slot(tag.as_bytes())))] = true;
                }
                seen.iter().all(|&s| s)
            })
            .unwrap_or(0);
        QueueName::new(name(salt, i))
    })
}

/// The inverse of [`spread`]: `q.s<salt>:i` back to `q` and `i` (the
/// layer keeps an answer only when naming it gives the name again).
fn parse() -> ShardParser {
    Arc::new(|physical: &QueueName| {
        let (rest, i) = physical.as_str().rsplit_once(':')?;
        let (q, _salt) = rest.rsplit_once(".s")?;
        Some((QueueName::new(q).ok()?, i.parse().ok()?))
    })
}

fn factory(which: Which) -> ClusterFactory {
    let prefix = common::fresh_prefix("shard");
    let names = (spread(prefix.clone()), parse());
    ClusterFactory::sharded_with_prefix(which, SHARDS, prefix, Some(names))
}

#[cfg(all(feature = "redis-rs", not(feature = "fred")))]
mod redis_rs {
    leaseq_conformance::suite!(super::factory(super::Which::RedisRs), model_cases = 8);
}

#[cfg(feature = "fred")]
mod fred {
    leaseq_conformance::suite!(super::factory(super::Which::Fred), model_cases = 8);
}
