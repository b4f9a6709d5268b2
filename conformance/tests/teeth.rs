//! The suite has teeth: against backends with known faults, the checks for
//! those faults report violations of the right invariants, every run; and
//! against the same wrappers without a fault, they pass.

mod teeth {
    pub(crate) mod faulty;
    pub(crate) mod two_list;
}

use std::sync::Arc;

use leaseq_conformance::checks::{
    basics, batch, dedup, delete, fencing, healing, isolation, lifecycle, limits, listing,
    ordering, reap_cost, recovery, redrive, remove, replies, schedules, storm,
};
use leaseq_conformance::runner::block_on;
use leaseq_conformance::{BackendFactory, CheckResult, Outcome, Rule, TestBackend, Unavailable};
use leaseq_core::{ManualClock, SystemClock};
use leaseq_memory::MemoryBackend;
use teeth::faulty::{Fault, Faulty};
use teeth::two_list::TwoList;

/// How many times each detection is repeated: it must hold every time.
const RUNS: usize = 5;

struct TwoListFactory;

#[leaseq_core::async_trait]
impl BackendFactory for TwoListFactory {
    fn name(&self) -> &str {
        "two-list"
    }
    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let clock = ManualClock::new();
        let b = TwoList::new(Arc::new(clock.clone()));
        Ok(TestBackend::manual(Arc::new(b), clock))
    }
}

struct FaultyFactory(Fault);

#[leaseq_core::async_trait]
impl BackendFactory for FaultyFactory {
    fn name(&self) -> &str {
        "faulty-memory"
    }
    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let clock = ManualClock::new();
        let inner = MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks();
        let b = Faulty::new(Arc::new(inner), self.0);
        Ok(TestBackend::manual(Arc::new(b), clock))
    }
}

/// Runs `check` RUNS times; each run must report one of `rules`.
fn caught<F, Fut>(what: &str, rules: &[Rule], check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = CheckResult>,
{
    for run in 0..RUNS {
        match block_on(check()) {
            Err(v) if rules.contains(&v.rule) => eprintln!("caught {what} (run {run}): {v}"),
            Err(v) => panic!("{what} (run {run}): reported {v}, expected one of {rules:?}"),
            Ok(o) => panic!("{what} (run {run}): the suite let it through: {o:?}"),
        }
    }
}

fn passes(what: &str, result: CheckResult) {
    assert_eq!(result, Ok(Outcome::Passed), "{what}");
}

#[test]
fn two_list_duplicate_requeue_is_caught_by_two_reapers() {
    caught(
        "two-list R1 with two reapers",
        &[Rule::Inv4, Rule::Inv1],
        || recovery::two_reapers_one_lease(&TwoListFactory),
    );
}

#[test]
fn two_list_duplicate_requeue_is_caught_by_many_reapers() {
    caught(
        "two-list R1 with eight reapers",
        &[Rule::Inv4, Rule::Inv1],
        || recovery::many_reapers_many_leases(&TwoListFactory),
    );
}

#[test]
fn two_list_dangling_id_is_caught() {
    caught("two-list R4 dangling id", &[Rule::Inv6], || {
        healing::claim_heals_dangling_id(&TwoListFactory)
    });
    caught("two-list R4 acked ghost", &[Rule::Inv6], || {
        healing::acked_ghost_is_removed(&TwoListFactory)
    });
}

#[test]
fn two_list_claim_gap_is_caught() {
    caught(
        "two-list R2 claim-to-lease gap",
        &[Rule::Inv2, Rule::Inv1],
        || recovery::reaper_inside_claim(&TwoListFactory),
    );
}

#[test]
fn two_list_unfenced_finish_is_caught() {
    caught("two-list R3 unfenced ack", &[Rule::Inv3], || {
        fencing::stale_token_after_reclaim(&TwoListFactory)
    });
}

#[test]
fn two_list_fails_the_storm() {
    caught(
        "two-list under a storm",
        &[Rule::Inv1, Rule::Inv2, Rule::Inv3, Rule::Inv5, Rule::Inv10],
        || storm::storm_no_loss(&TwoListFactory),
    );
}

#[test]
fn unfenced_ack_is_caught() {
    let f = FaultyFactory(Fault::UnfencedAck);
    caught("ack that ignores the token", &[Rule::Inv3], || {
        fencing::stale_token_after_reclaim(&f)
    });
    caught(
        "ack that ignores the token, racing a reap",
        &[Rule::Inv3, Rule::Inv4, Rule::Inv10],
        || fencing::ack_races_reclaim(&f),
    );
}

#[test]
fn unfenced_give_back_is_caught() {
    let f = FaultyFactory(Fault::UnfencedGiveBack);
    caught("give_back that ignores the token", &[Rule::Inv3], || {
        fencing::stale_token_after_reclaim(&f)
    });
}

#[test]
fn a_recovered_lease_with_a_field_read_wrong_is_caught() {
    caught(
        "recover_claim that reads attempts from max attempts",
        &[Rule::Contract("recover_claim")],
        || replies::claim_recovers_its_own_leases(&FaultyFactory(Fault::RecoverMixesFields)),
    );
}

#[test]
fn a_fate_that_calls_every_expired_lease_lost_is_caught() {
    caught(
        "lease_fate that reads the clock before the item",
        &[Rule::Contract("lease_fate")],
        || replies::lease_fate_names_what_happened(&FaultyFactory(Fault::FateOfExpiredIsLost)),
    );
}

#[test]
fn a_fate_without_finishing_traces_is_caught() {
    caught(
        "lease_fate that keeps no trace of the lease's own finishing call",
        &[Rule::Contract("lost replies")],
        || {
            replies::landed_finishes_past_expiry_are_reported(&FaultyFactory(
                Fault::FateWithoutTrace,
            ))
        },
    );
}

#[test]
fn takeover_traces_a_reap_does_not_leave_are_caught() {
    caught(
        "lease_fate that claims takeover traces, whose reap leaves none",
        &[Rule::Contract("lost replies")],
        || {
            replies::landed_finishes_past_expiry_are_reported(&FaultyFactory(
                Fault::TakeoverWithoutTrace,
            ))
        },
    );
}

#[test]
fn a_claim_that_keeps_the_takeover_trace_is_caught() {
    caught(
        "takeover traces a claim sent again under a reaped token leaves behind",
        &[Rule::Contract("lost replies")],
        || {
            replies::claim_sent_again_under_a_reaped_token(&FaultyFactory(
                Fault::ClaimKeepsTakeoverTrace,
            ))
        },
    );
}

#[test]
fn a_recovery_that_leaves_expired_leases_to_a_reaper_is_caught() {
    caught(
        "recover_claim that returns only live leases",
        &[Rule::Contract("recover_claim")],
        || {
            replies::lost_claim_past_expiry_costs_no_attempt(&FaultyFactory(
                Fault::RecoverLeavesExpired,
            ))
        },
    );
}

#[test]
fn the_wrapper_passes_the_recovery_and_fate_checks_without_a_fault() {
    let f = FaultyFactory(Fault::None);
    passes(
        "claim_recovers_its_own_leases",
        block_on(replies::claim_recovers_its_own_leases(&f)),
    );
    passes(
        "lease_fate_names_what_happened",
        block_on(replies::lease_fate_names_what_happened(&f)),
    );
    passes(
        "landed_finishes_past_expiry_are_reported",
        block_on(replies::landed_finishes_past_expiry_are_reported(&f)),
    );
    passes(
        "lost_claim_past_expiry_costs_no_attempt",
        block_on(replies::lost_claim_past_expiry_costs_no_attempt(&f)),
    );
    passes(
        "claim_sent_again_under_a_reaped_token",
        block_on(replies::claim_sent_again_under_a_reaped_token(&f)),
    );
}

#[test]
fn a_rate_change_that_forgets_the_window_is_caught() {
    caught(
        "set_queue_limits that clears before it sets",
        &[Rule::Contract("set_queue_limits")],
        || {
            limits::rate_window_outlives_a_change_not_a_clear(&FaultyFactory(
                Fault::RateForgottenOnChange,
            ))
        },
    );
}

#[test]
fn a_retry_hint_shorter_than_the_rate_window_is_caught() {
    caught(
        "retry_after of the concurrency limit when the rate binds longer",
        &[Rule::Contract("set_queue_limits")],
        || {
            limits::retry_after_names_the_binding_limit(&FaultyFactory(
                Fault::ConcurrencyHintAlways,
            ))
        },
    );
}

#[test]
fn the_wrapper_passes_the_limit_checks_without_a_fault() {
    let f = FaultyFactory(Fault::None);
    passes(
        "rate_window_outlives_a_change_not_a_clear",
        block_on(limits::rate_window_outlives_a_change_not_a_clear(&f)),
    );
    passes(
        "retry_after_names_the_binding_limit",
        block_on(limits::retry_after_names_the_binding_limit(&f)),
    );
}

#[test]
fn a_cadence_change_that_keeps_the_old_schedule_is_caught() {
    caught(
        "put_schedule that compares only queue and payload",
        &[Rule::Contract("put_schedule")],
        || {
            schedules::every_change_of_a_schedule_is_a_revision(&FaultyFactory(
                Fault::CadenceChangeIgnored,
            ))
        },
    );
    passes(
        "every_change_of_a_schedule_is_a_revision without a fault",
        block_on(schedules::every_change_of_a_schedule_is_a_revision(
            &FaultyFactory(Fault::None),
        )),
    );
}

#[test]
fn double_claim_is_caught() {
    let f = FaultyFactory(Fault::DoubleClaim);
    caught("claim of a live-leased item", &[Rule::Inv2], || {
        recovery::claim_skips_live_lease(&f)
    });
    caught(
        "claim of a live-leased item, concurrently",
        &[Rule::Inv2],
        || recovery::concurrent_claims_each_once(&f),
    );
    caught(
        "claim of a live-leased item, in a storm",
        &[Rule::Inv2, Rule::Inv5, Rule::Inv3],
        || storm::storm_no_loss(&f),
    );
}

#[test]
fn the_wrapper_without_a_fault_passes_the_same_checks() {
    let f = FaultyFactory(Fault::None);
    passes(
        "stale_token_after_reclaim",
        block_on(fencing::stale_token_after_reclaim(&f)),
    );
    passes(
        "ack_races_reclaim",
        block_on(fencing::ack_races_reclaim(&f)),
    );
    passes(
        "claim_skips_live_lease",
        block_on(recovery::claim_skips_live_lease(&f)),
    );
    passes(
        "concurrent_claims_each_once",
        block_on(recovery::concurrent_claims_each_once(&f)),
    );
    passes("storm_no_loss", block_on(storm::storm_no_loss(&f)));
}

#[test]
fn a_batch_ack_looped_per_lease_is_caught() {
    caught(
        "ack_many looped over ack (a wrapper that does not forward it)",
        &[Rule::Contract("batches")],
        || batch::batches_are_single_steps(&FaultyFactory(Fault::LoopedBatchAck)),
    );
}

#[test]
fn a_backend_that_forgets_what_a_lost_call_did_is_caught() {
    caught(
        "recover_claim and lease_fate that know nothing",
        &[Rule::Contract("lost replies")],
        || replies::lost_replies_settle_truthfully(&FaultyFactory(Fault::Amnesia)),
    );
}

/// The memory backend on the wall clock behind a seeded fault.
struct RealClockFaultyFactory(Fault);

#[leaseq_core::async_trait]
impl BackendFactory for RealClockFaultyFactory {
    fn name(&self) -> &str {
        "faulty-memory-real-clock"
    }
    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let inner = MemoryBackend::with_clock(Arc::new(SystemClock)).with_test_hooks();
        Ok(TestBackend::real(Arc::new(Faulty::new(
            Arc::new(inner),
            self.0,
        ))))
    }
}

#[test]
fn a_request_memory_kept_in_the_wrong_unit_is_caught() {
    caught(
        "enqueue_once that remembers a request for 600 ms",
        &[Rule::Contract("unique_for/enqueue_once")],
        || {
            dedup::holds_last_their_whole_time(&RealClockFaultyFactory(
                Fault::RequestMemoryInMillis,
            ))
        },
    );
}

#[test]
fn claims_that_share_one_spec_are_caught() {
    caught(
        "every claim under the first spec's tokens (one spec kept for all claims)",
        &[Rule::Contract("lost replies")],
        || replies::lost_replies_settle_truthfully(&FaultyFactory(Fault::OneSpecForAll)),
    );
}

#[test]
fn a_stray_entry_left_by_reap_is_caught_though_a_later_call_repairs_it() {
    caught(
        "a reap that leaves a stray Ready entry",
        &[Rule::Inv1],
        || lifecycle::reap_requeues_expired(&FaultyFactory(Fault::StrayAfterReap)),
    );
}

#[test]
fn a_clock_that_ticks_once_a_second_is_caught() {
    caught(
        "a clock cut to whole seconds",
        &[Rule::Contract("now")],
        || isolation::clock_follows_real_time(&RealClockFaultyFactory(Fault::CoarseClock)),
    );
}

#[test]
fn dedup_keys_shared_across_queues_are_caught() {
    caught(
        "dedup keys global across queues",
        &[Rule::Contract("queue isolation")],
        || isolation::queues_are_isolated(&FaultyFactory(Fault::GlobalDedup)),
    );
}

#[test]
fn a_release_that_requeues_at_the_back_is_caught() {
    caught(
        "a release that requeues a copy at the back",
        &[Rule::Inv8],
        || ordering::order_holds_after_every_return_to_ready(&FaultyFactory(Fault::ReleaseToBack)),
    );
}

#[test]
fn a_claim_time_reported_as_the_enqueue_time_is_caught() {
    caught(
        "the claim's time as enqueued_at",
        &[Rule::Contract("enqueued_at")],
        || lifecycle::enqueue_time_is_kept(&FaultyFactory(Fault::ClaimTimeAsEnqueueTime)),
    );
}

#[test]
fn a_reaper_that_visits_every_live_lease_is_caught() {
    caught("a reap that walks every live lease", &[Rule::Inv7], || {
        reap_cost::reap_cost_ignores_live_leases(&FaultyFactory(Fault::ScanningReap))
    });
}

#[test]
fn the_reap_cost_check_passes_without_a_fault() {
    for run in 0..RUNS {
        let r = block_on(reap_cost::reap_cost_ignores_live_leases(&FaultyFactory(
            Fault::None,
        )));
        passes(&format!("reap_cost_ignores_live_leases, run {run}"), r);
    }
}

#[test]
fn the_new_checks_pass_without_a_fault() {
    for r in [
        block_on(lifecycle::enqueue_time_is_kept(&FaultyFactory(Fault::None))),
        block_on(lifecycle::reap_requeues_expired(&FaultyFactory(
            Fault::None,
        ))),
        block_on(isolation::clock_follows_real_time(&RealClockFaultyFactory(
            Fault::None,
        ))),
        block_on(isolation::queues_are_isolated(&FaultyFactory(Fault::None))),
        block_on(ordering::order_holds_after_every_return_to_ready(
            &FaultyFactory(Fault::None),
        )),
        block_on(replies::lost_replies_settle_truthfully(&FaultyFactory(
            Fault::None,
        ))),
    ] {
        passes("a new check on the wrapper without a fault", r);
    }
}

#[test]
fn limits_the_backend_ignores_are_caught() {
    let f = FaultyFactory(Fault::IgnoredLimits);
    caught(
        "limits accepted but not enforced",
        &[Rule::Contract("set_queue_limits")],
        || limits::concurrency_limit_holds_under_race(&f),
    );
    caught(
        "a rate accepted but not enforced",
        &[Rule::Contract("set_queue_limits")],
        || limits::rate_limit_holds_per_window(&f),
    );
}

#[test]
fn a_fire_split_into_read_enqueue_write_is_caught() {
    let f = FaultyFactory(Fault::SplitFire);
    caught(
        "fire_schedule as read, enqueue, write",
        &[Rule::Contract("fire_schedule")],
        || schedules::schedulers_race_one_item_per_tick(&f),
    );
    caught(
        "Scheduler runtimes over a split fire",
        &[Rule::Contract("fire_schedule")],
        || schedules::scheduler_runtimes_race_and_restart(&f),
    );
}

#[test]
fn a_concurrency_limit_checked_in_the_client_is_caught() {
    caught(
        "a concurrency limit checked in the client, apart from the claim",
        &[Rule::Contract("set_queue_limits")],
        || limits::concurrency_limit_holds_under_race(&FaultyFactory(Fault::LimitCheckedInClient)),
    );
}

#[test]
fn the_limit_checks_pass_without_a_fault() {
    let f = FaultyFactory(Fault::None);
    for r in [
        block_on(limits::concurrency_limit_holds_under_race(&f)),
        block_on(limits::rate_limit_holds_per_window(&f)),
        block_on(limits::reap_frees_limited_slots(&f)),
        block_on(limits::limits_are_per_queue(&f)),
        block_on(limits::clearing_limits_restores_claims(&f)),
        block_on(limits::concurrency_limit_holds_under_race(
            &RealClockFaultyFactory(Fault::None),
        )),
        block_on(limits::rate_limit_holds_per_window(
            &RealClockFaultyFactory(Fault::None),
        )),
    ] {
        passes("a limits check on the wrapper without a fault", r);
    }
}

#[test]
fn the_schedule_checks_pass_without_a_fault() {
    let f = FaultyFactory(Fault::None);
    passes(
        "schedulers_race_one_item_per_tick",
        block_on(schedules::schedulers_race_one_item_per_tick(&f)),
    );
    passes(
        "scheduler_runtimes_race_and_restart",
        block_on(schedules::scheduler_runtimes_race_and_restart(&f)),
    );
}

const QUEUES: Rule = Rule::Contract("queues");
const DELETE: Rule = Rule::Contract("delete_queue");

#[test]
fn a_listing_that_keeps_emptied_queues_is_caught() {
    let f = FaultyFactory(Fault::ListedAfterPurge);
    caught("a purged queue still listed", &[QUEUES], || {
        listing::listed_while_holding_items(&f)
    });
    caught("a purged queue among the filled ones", &[QUEUES], || {
        listing::listing_shows_exactly_the_filled_queues(&f)
    });
    caught("phantoms after racing purges", &[QUEUES], || {
        listing::racing_calls_leave_no_phantom_and_hide_nothing(&f)
    });
}

#[test]
fn a_listing_that_hides_queues_of_dead_items_is_caught() {
    caught("a queue of Dead items left out", &[QUEUES], || {
        listing::listed_while_holding_items(&FaultyFactory(Fault::DeadHidden))
    });
}

/// A listing kept by the client from its calls' replies is right one call
/// at a time (the sequential checks pass it) and wrong when calls race.
#[test]
fn a_listing_kept_by_the_client_is_caught_when_calls_race() {
    let f = FaultyFactory(Fault::ListingKeptByCalls);
    passes(
        "listed_while_holding_items, calls one at a time",
        block_on(listing::listed_while_holding_items(&f)),
    );
    caught("a listing kept from racing calls", &[QUEUES], || {
        listing::racing_calls_leave_no_phantom_and_hide_nothing(&f)
    });
}

/// A delete that only purges leaves the queue's limits behind.
#[test]
fn a_delete_that_only_purges_is_caught() {
    caught("limits left by a delete", &[DELETE], || {
        delete::delete_queue_forgets_the_queue(&FaultyFactory(Fault::DeleteAsPurge))
    });
}

#[test]
fn the_delete_checks_pass_without_a_fault() {
    let manual = FaultyFactory(Fault::None);
    let real = RealClockFaultyFactory(Fault::None);
    for r in [
        block_on(delete::delete_queue_forgets_the_queue(&manual)),
        block_on(delete::ids_never_return_after_delete(&manual)),
        block_on(delete::racing_enqueues_leave_whole_items(&manual)),
        block_on(delete::racing_enqueues_leave_whole_items(&real)),
    ] {
        passes("a delete check on a backend without a fault", r);
    }
}

#[test]
fn the_listing_checks_pass_without_a_fault() {
    let manual = FaultyFactory(Fault::None);
    let real = RealClockFaultyFactory(Fault::None);
    for r in [
        block_on(listing::listed_while_holding_items(&manual)),
        block_on(listing::every_item_path_lists_the_queue(&manual)),
        block_on(listing::listing_shows_exactly_the_filled_queues(&manual)),
        block_on(listing::racing_calls_leave_no_phantom_and_hide_nothing(
            &manual,
        )),
        block_on(listing::listed_while_holding_items(&real)),
        block_on(listing::racing_calls_leave_no_phantom_and_hide_nothing(
            &real,
        )),
        block_on(listing::listed_while_holding_items(&TwoListFactory)),
    ] {
        passes("a listing check on a backend without a fault", r);
    }
}

#[test]
fn a_redrive_item_that_moves_the_oldest_dead_item_is_caught() {
    caught(
        "redrive_item that moves the oldest Dead item instead of the named one",
        &[Rule::Contract("redrive_item")],
        || redrive::redrive_item_moves_that_item(&FaultyFactory(Fault::RedriveOldest)),
    );
}

#[test]
fn a_redrive_item_split_into_read_and_move_is_caught() {
    caught(
        "redrive_item as a read of the state, then a move",
        &[Rule::Contract("redrive_item")],
        || redrive::concurrent_redrive_item_moves_once(&FaultyFactory(Fault::SplitRedriveItem)),
    );
}

#[test]
fn a_delay_cut_short_by_a_millisecond_is_caught() {
    caught(
        "an enqueue whose delayed items fall due 1 ms early",
        &[Rule::Contract("enqueue with delay")],
        || lifecycle::delayed_item_waits(&FaultyFactory(Fault::DueEarly)),
    );
}

#[test]
fn a_release_that_requeues_without_the_priority_is_caught() {
    caught(
        "a release that requeues the item at priority 0",
        &[Rule::Inv8],
        || {
            ordering::priority_holds_after_every_return_to_ready(&FaultyFactory(
                Fault::ReleaseDropsPriority,
            ))
        },
    );
}

#[test]
fn a_peek_that_misses_due_items_no_claim_has_moved_is_caught() {
    caught(
        "a peek of Ready that reads only items filed Ready",
        &[Rule::Contract("a due Scheduled item is Ready")],
        || lifecycle::due_item_is_ready_to_every_read(&FaultyFactory(Fault::PeekMissesDue)),
    );
}

#[test]
fn an_enqueue_once_replay_that_forgets_what_was_deduplicated_is_caught() {
    caught(
        "a resent enqueue_once that reports every entry as newly written",
        &[Rule::Contract("enqueue_once")],
        || replies::enqueue_once_writes_once(&FaultyFactory(Fault::ReplayForgetsDedup)),
    );
}

#[test]
fn a_remove_item_split_into_read_and_remove_is_caught() {
    caught(
        "remove_item as a read of the state, then a removal",
        &[Rule::Contract("remove_item")],
        || remove::racing_removes_settle_each_item_once(&FaultyFactory(Fault::SplitRemove)),
    );
}

#[test]
fn the_remove_item_checks_pass_without_a_fault() {
    let f = FaultyFactory(Fault::None);
    for r in [
        block_on(remove::remove_item_takes_out_that_item(&f)),
        block_on(remove::remove_item_loses_its_lease(&f)),
        block_on(remove::remove_item_frees_its_dedup_key(&f)),
        block_on(remove::racing_removes_settle_each_item_once(&f)),
    ] {
        passes("a remove_item check on a backend without a fault", r);
    }
}

#[test]
fn the_redrive_item_checks_pass_without_a_fault() {
    let f = FaultyFactory(Fault::None);
    for r in [
        block_on(redrive::redrive_item_moves_that_item(&f)),
        block_on(redrive::redrive_item_leaves_other_states(&f)),
        block_on(redrive::concurrent_redrive_item_moves_once(&f)),
        block_on(redrive::redrive_item_moves_that_item(&TwoListFactory)),
        block_on(redrive::redrive_item_leaves_other_states(&TwoListFactory)),
    ] {
        passes("a redrive_item check on a wrapper without its fault", r);
    }
    // Each faulty wrapper passes the checks it is not built to fail: the
    // detection above is the fault's, not an accident of the wrapper.
    passes(
        "redrive_item_leaves_other_states with RedriveOldest",
        block_on(redrive::redrive_item_leaves_other_states(&FaultyFactory(
            Fault::RedriveOldest,
        ))),
    );
    passes(
        "redrive_item_moves_that_item with SplitRedriveItem",
        block_on(redrive::redrive_item_moves_that_item(&FaultyFactory(
            Fault::SplitRedriveItem,
        ))),
    );
}

#[test]
fn a_slot_freed_only_by_ack_and_reap_is_caught() {
    caught(
        "a concurrency slot that only acks and reaps free",
        &[Rule::Contract("set_queue_limits")],
        || limits::every_exit_frees_a_slot(&FaultyFactory(Fault::SlotFreedOnlyByAck)),
    );
}

#[test]
fn an_enqueue_once_split_into_lookup_enqueue_record_is_caught() {
    caught(
        "enqueue_once as look up, enqueue, record",
        &[Rule::Contract("enqueue_once")],
        || replies::concurrent_enqueue_once_writes_once(&FaultyFactory(Fault::SplitEnqueueOnce)),
    );
}

#[test]
fn the_new_checks_pass_on_the_wrapper_without_a_fault() {
    let f = FaultyFactory(Fault::None);
    passes(
        "every_exit_frees_a_slot",
        block_on(limits::every_exit_frees_a_slot(&f)),
    );
    passes(
        "concurrent_enqueue_once_writes_once",
        block_on(replies::concurrent_enqueue_once_writes_once(&f)),
    );
    passes(
        "reapers_dead_letter_once",
        block_on(recovery::reapers_dead_letter_once(&f)),
    );
    passes(
        "concurrent_redrives_move_each_once",
        block_on(redrive::concurrent_redrives_move_each_once(&f)),
    );
}

#[test]
fn listings_and_a_redrive_by_item_id_are_caught() {
    let f = FaultyFactory(Fault::ById);
    caught(
        "peek of each state sorted by item id",
        &[Rule::Contract("peek")],
        || basics::peek_follows_each_index_order(&f),
    );
    caught(
        "Dead listed and redriven by item id, not death order",
        &[Rule::Contract("redrive")],
        || lifecycle::dead_order_is_death_order(&f),
    );
    // The checks it used to pass: one item per state, deaths in id order.
    passes(
        "stats_and_peek with ById",
        block_on(basics::stats_and_peek(&f)),
    );
    passes(
        "redrive_dead_items with ById",
        block_on(lifecycle::redrive_dead_items(&f)),
    );
}

#[test]
fn the_order_checks_pass_without_a_fault() {
    let f = FaultyFactory(Fault::None);
    for r in [
        block_on(basics::peek_follows_each_index_order(&f)),
        block_on(lifecycle::dead_order_is_death_order(&f)),
        block_on(basics::peek_follows_each_index_order(
            &RealClockFaultyFactory(Fault::None),
        )),
        block_on(lifecycle::dead_order_is_death_order(
            &RealClockFaultyFactory(Fault::None),
        )),
    ] {
        passes("an order check on the wrapper without a fault", r);
    }
}
