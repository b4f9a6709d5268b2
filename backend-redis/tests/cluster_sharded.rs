//! The conformance suite on a logical queue sharded 4 ways over the local
//! 3-master cluster, each queue's shards placed so they cover all three
//! masters. A sharded queue keeps order per shard only, so the checks that
//! assume one global FIFO order (`ordering::*`, and `basics::stats_and_peek`,
//! which expects peek to list items in enqueue order, and
//! `healing::claim_heals_dangling_id` and
//! `healing::dangling_ids_never_stall_a_claim`, which expect a small claim
//! to meet every planted dangling id in the one Ready order, while a sharded
//! claim fills up from the first shards it visits and heals the others'
//! entries only when it reaches them) are left out; every
//! other check runs on the `redis` crate client, and the race checks (storm,
//! INV-2, INV-4, INV-6, INV-9) on `fred` too.

mod common;

use std::sync::Arc;

use common::{ClusterFactory, Which};
use leaseq_core::QueueName;
use leaseq_redis::{key_slot, ShardNamer};

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

fn factory(which: Which) -> ClusterFactory {
    let prefix = common::fresh_prefix("shard");
    ClusterFactory::sharded_with_prefix(which, SHARDS, prefix.clone(), Some(spread(prefix)))
}

macro_rules! checks {
    ($which:ident: $($module:ident :: $check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                let f = factory(Which::$which);
                let r = leaseq_conformance::runner::block_on(
                    leaseq_conformance::checks::$module::$check(&f),
                );
                leaseq_conformance::runner::conclude(
                    stringify!($check),
                    leaseq_conformance::BackendFactory::name(&f),
                    r,
                );
            }
        )*
    };
}

#[cfg(feature = "redis-rs")]
mod redis_rs {
    use super::*;
    checks!(RedisRs:
        basics::round_trip, basics::item_and_not_found,
        basics::extend_moves_expiry, basics::batch_results_in_order,
        lifecycle::release_to_ready, lifecycle::release_with_delay,
        lifecycle::release_exhausted_goes_dead, lifecycle::fail_goes_dead_with_reason,
        lifecycle::redrive_dead_items, lifecycle::purge_removes_everything,
        lifecycle::delayed_item_waits, lifecycle::reap_requeues_expired,
        lifecycle::reap_final_attempt_goes_dead, lifecycle::expired_unreaped_lease_still_works,
        fencing::stale_token_after_reap, fencing::stale_token_after_reclaim,
        fencing::forged_token_is_rejected, fencing::spent_token_is_rejected,
        fencing::ack_races_reap, fencing::ack_races_reclaim,
        recovery::two_reapers_one_lease, recovery::many_reapers_many_leases,
        recovery::reaper_inside_claim, recovery::claim_skips_live_lease,
        recovery::concurrent_claims_each_once, recovery::reap_touches_only_expired,
        recovery::no_redelivery_after_ack,
        storm::storm_no_loss,
        healing::acked_ghost_is_removed,
        healing::indexes_stay_consistent,
        dedup::dedup_returns_holder, dedup::dedup_within_batch,
        dedup::concurrent_dedup_creates_one, dedup::purge_frees_dedup_keys,
        input::bad_enqueue_writes_nothing, input::bad_release_keeps_lease,
        input::edge_payloads_round_trip,
    );
}

#[cfg(feature = "fred")]
mod fred {
    use super::*;
    checks!(Fred:
        storm::storm_no_loss,
        recovery::two_reapers_one_lease, recovery::many_reapers_many_leases,
        recovery::reaper_inside_claim, recovery::concurrent_claims_each_once,
        fencing::ack_races_reap, dedup::concurrent_dedup_creates_one,
        healing::indexes_stay_consistent,
    );
}
