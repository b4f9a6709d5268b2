//! The leaseq conformance suite: the checks that prove a backend keeps the
//! contract (`leaseq_core::Backend`, invariants INV-1 … INV-10), for the
//! project's own backends and for anyone writing a new one.
//!
//! A backend's whole test file is a factory and one macro call:
//!
//! ```
//! use std::sync::Arc;
//! use leaseq_conformance::{BackendFactory, TestBackend, Unavailable};
//! use leaseq_core::ManualClock;
//! use leaseq_memory::MemoryBackend;
//!
//! /// A fresh memory backend per check, on a clock the suite advances.
//! struct MemoryFactory;
//!
//! #[leaseq_core::async_trait]
//! impl BackendFactory for MemoryFactory {
//!     fn name(&self) -> &str {
//!         "memory"
//!     }
//!     async fn backend(&self) -> Result<TestBackend, Unavailable> {
//!         let clock = ManualClock::new();
//!         let backend = MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks();
//!         Ok(TestBackend::manual(Arc::new(backend), clock))
//!     }
//! }
//!
//! // One #[test] per check, each on its own multi-thread runtime.
//! leaseq_conformance::suite!(MemoryFactory);
//!
//! // Checks are plain functions too: run one and look at the verdict.
//! # fn main() {
//! let verdict = leaseq_conformance::runner::block_on(
//!     leaseq_conformance::checks::fencing::stale_token_after_reclaim(&MemoryFactory),
//! );
//! assert_eq!(verdict, Ok(leaseq_conformance::Outcome::Passed));
//! # }
//! ```
//!
//! # Running it
//! Put the file above in your backend's `tests/` (say `tests/conformance.rs`)
//! with `leaseq-conformance` and `leaseq-core` as dev-dependencies (no
//! `tokio` needed: each test builds its own four-thread runtime), then
//! `cargo test --test conformance`. Each check is a
//! test named after it, so `cargo test --test conformance storm` runs one.
//!
//! - **Isolation.** Each check asks the factory for a backend and uses its
//!   own queue, `conf-<check>-<random>` (and, to start over, fresh queues
//!   named after it, never a purge, so core checks run on a backend
//!   without the Admin group), which it deletes when done (also after a
//!   violation) through the `Admin` group, so checks run in parallel
//!   against one server. A backend without `Admin` should give each check
//!   a fresh store: nothing cleans its queues.
//! - **Time.** A backend on a [`ManualClock`](leaseq_core::ManualClock)
//!   ([`TimeControl::Manual`]) has its clock advanced; a server backend
//!   ([`TimeControl::Real`]) gets short leases (250 ms) and the suite waits
//!   until the backend's own clock has passed the point it needs (never a
//!   guessed sleep). With test hooks, `expire_leases` and `make_due` are
//!   used where they save waiting.
//! - **Skips are loud.** A check that needs a capability or test hooks the
//!   backend lacks prints `SKIPPED <check> on <backend>: <reason>` to the
//!   process's stderr, past the test harness's capture, so a plain
//!   `cargo test` shows it. A factory that returns [`Unavailable`] prints
//!   `SKIPPED: <backend> unavailable: <reason>`; when the environment
//!   variable `CI` is `true` that is a failure instead.
//! - **Strict mode.** `LEASEQ_CONFORMANCE_STRICT=1` turns every skip into a
//!   failure: a backend author's green then means every check ran. A
//!   factory on a manual clock cannot pass it (`clock_follows_real_time`
//!   needs a real one): run the suite on a real clock too, with a second
//!   `suite!` in a module of its own, as
//!   `conformance/tests/memory_real_clock.rs` does. Cargo's summary
//!   counts a skip as a pass; the `SKIPPED` lines are the count.
//! - **The reference model runs too.** `suite!` adds a `reference_model`
//!   test: random operation sequences compared with a pure model of the
//!   contract (`LEASEQ_MODEL_CASES`; by default 256 sequences on a manual
//!   clock, 32 on a real one, where each waits on the store). It finds
//!   what single checks miss, e.g. ids reused after `purge`.
//! - **Failures say where.** A failure names the check, the backend, the
//!   rule broken (invariant or contract clause) and the check's source file
//!   ([`runner::failure_message`] builds it, for tests that pin down what the
//!   suite says about a seeded bug).
//! - **A worked example.** `examples/naive-backend` in the leaseq repository
//!   is a backend written from these docs (a mutex, a map and an ordered map
//!   per state) with this test file, and seeded bugs whose tests run single
//!   checks, and the reference model, on their own.
//! - **Repetitions.** Race checks repeat; `LEASEQ_CONFORMANCE_SCALE=N`
//!   multiplies their rounds and the storm's size by N (default 1).
//!
//! # What it checks
//! Every check returns a [`CheckResult`]: [`Outcome::Passed`],
//! [`Outcome::Skipped`] with the reason, or a [`Violation`] naming the
//! [`Rule`] broken and the evidence. The themes, one module each under
//! [`checks`]: basics and lifecycle (round trip, inspection, stats, peek,
//! extend, release, fail, redrive, purge, delays, reap), redrive of one
//! item (`redrive_item`: only the item named, only from Dead, once under
//! racing callers), fencing (INV-3,
//! incl. a reaper racing acks), batch (`ack_many`: INV-3 per lease, INV-10),
//! removal of one item (`remove_item`: from
//! any state, its lease lost and its key free, once under racing removes,
//! claims and acks), recovery (INV-2, INV-4, INV-7, INV-10), reap cost (INV-7 measured: a
//! reap among 10,000 live leases against one among 10), collect cost (the
//! History group's collect measured the same way: 10,000 kept items that
//! have not expired against 10), storm (INV-5, history-checked),
//! healing (INV-6, INV-1), ordering (INV-8), dedup (INV-9), input (bad
//! input writes nothing), clock (a claim reads the clock inside its step), limits (global concurrency and rate limits per
//! queue, for backends whose `Capabilities::queue_limits` is `Global`),
//! schedules (one item per tick across racing schedulers, acks, restarts
//! and skewed clocks; changes and removals; unique-for keys held after the
//! ack) and listing (`queues` lists a queue exactly while it holds an
//! item, from every call that creates one, also while enqueues, acks and
//! purges race; checks that share a backend assert only about their own
//! queues).

// Examples in the docs compile without warnings, as users copy them; an
// example may define a function it shows without calling it.
#![doc(test(attr(deny(warnings), allow(dead_code))))]

mod cx;
mod groupwise;
mod harness;
mod history;
mod outcome;

pub mod checks;
pub mod model;
pub mod runner;

pub use harness::{scale, BackendFactory, TestBackend, TimeControl, Unavailable};
pub use outcome::{CheckResult, Outcome, Rule, Violation};

/// Every check as `module::name`, fed to the macro `$cb`.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_checks {
    ($cb:ident ! ($($args:tt)*)) => {
        $crate::$cb! { ($($args)*)
            basics::round_trip
            basics::item_and_not_found
            basics::stats_and_peek
            basics::peek_follows_each_index_order
            basics::extend_moves_expiry
            basics::batch_results_in_order
            lifecycle::release_to_ready
            lifecycle::release_with_delay
            lifecycle::release_exhausted_goes_dead
            lifecycle::fail_goes_dead_with_reason
            lifecycle::redrive_dead_items
            lifecycle::dead_order_is_death_order
            redrive::redrive_item_moves_that_item
            redrive::redrive_item_leaves_other_states
            redrive::concurrent_redrive_item_moves_once
            redrive::concurrent_redrives_move_each_once
            redrive::redrive_item_races_the_death
            redrive::fail_after_redrive_records_the_new_reason
            lifecycle::purge_removes_everything
            delete::delete_queue_forgets_the_queue
            delete::ids_never_return_after_delete
            delete::racing_enqueues_leave_whole_items
            remove::remove_item_takes_out_that_item
            remove::remove_item_loses_its_lease
            remove::remove_item_takes_a_cancel_requested_lease
            remove::remove_item_frees_its_dedup_key
            remove::racing_removes_settle_each_item_once
            control::cancel_ends_waiting_items_at_once
            control::cancelled_lease_ends_whatever_it_reports
            control::cancel_races_claims
            control::cancel_races_ack_and_reap
            control::racing_cancels_answer_once
            control::cancelled_lease_holds_no_key
            control::cancel_signal_reaches_the_holder
            control::pause_holds_every_claim
            control::pause_races_claims
            control::pause_holds_due_scheduled_items
            control::snooze_spends_no_attempt
            control::run_now_moves_waiting_items
            control::progress_is_fenced_and_per_lease
            control::progress_ends_with_its_lease_under_a_resent_claim
            control::progress_ends_with_a_released_lease_under_a_resent_claim
            registry::registry_lists_live_workers
            history::kept_items_record_their_ending
            history::cancelled_items_are_kept_as_cancelled
            history::retention_count_keeps_the_newest
            history::collect_removes_what_expired
            history::purge_and_delete_take_the_history
            history::wait_finished_answers_the_result
            history::completions_are_counted
            history::cancelled_endings_are_not_completions
            history::dead_letters_go_by_their_bound
            collect_cost::collect_cost_ignores_kept_items
            history_interplay::unique_for_holds_as_without_history
            history_interplay::redriven_letters_leave_the_dead_bound
            events::events_report_each_change
            events::a_slow_subscriber_lags_and_goes_on
            lifecycle::delayed_item_waits
            lifecycle::due_item_is_ready_to_every_read
            lifecycle::reap_requeues_expired
            lifecycle::reap_final_attempt_goes_dead
            lifecycle::expired_unreaped_lease_still_works
            lifecycle::give_back_spends_no_attempt
            lifecycle::enqueue_time_is_kept
            lifecycle::reap_with_due_scheduled_items
            lifecycle::wait_for_work_returns_in_every_state
            fencing::stale_token_after_reap
            fencing::stale_token_after_reclaim
            fencing::forged_token_is_rejected
            fencing::spent_token_is_rejected
            fencing::ack_races_reap
            fencing::extend_races_reap
            fencing::ack_races_reclaim
            batch::ack_many_fences_each
            batch::ack_many_rejects_sibling_tokens
            batch::ack_many_races_reap
            batch::batches_are_single_steps
            recovery::two_reapers_one_lease
            recovery::many_reapers_many_leases
            recovery::reapers_dead_letter_once
            recovery::reaper_inside_claim
            recovery::claim_skips_live_lease
            recovery::concurrent_claims_each_once
            recovery::reap_touches_only_expired
            recovery::one_call_finishes_every_batch
            reap_cost::reap_cost_ignores_live_leases
            recovery::no_redelivery_after_ack
            replies::claim_recovers_its_own_leases
            replies::recovered_in_claim_order_across_priorities
            replies::lease_fate_names_what_happened
            replies::lease_fate_at_its_bounds
            replies::lease_fate_after_removals
            replies::settling_sees_requeues
            replies::enqueue_once_writes_once
            replies::concurrent_enqueue_once_writes_once
            replies::lost_replies_settle_truthfully
            replies::landed_finishes_past_expiry_are_reported
            replies::lost_claim_past_expiry_costs_no_attempt
            replies::claim_sent_again_under_a_reaped_token
            replies::fate_past_expiry_is_the_tokens_own
            replies::recover_claim_leaves_other_claims_expired
            storm::storm_no_loss
            healing::claim_heals_dangling_id
            healing::acked_ghost_is_removed
            healing::dangling_ids_never_stall_a_claim
            healing::indexes_stay_consistent
            healing::poison_is_quarantined
            healing::leases_past_the_horizon_expire
            ordering::fifo_within_priority
            ordering::priority_then_fifo
            dedup::dedup_returns_holder
            dedup::dedup_within_batch
            dedup::concurrent_dedup_creates_one
            dedup::purge_frees_dedup_keys
            dedup::holds_last_their_whole_time
            input::bad_enqueue_writes_nothing
            input::bad_release_keeps_lease
            input::edge_payloads_round_trip
            input::hostile_inputs_have_one_answer
            isolation::queues_are_isolated
            isolation::clock_follows_real_time
            clock::claims_read_the_clock_in_their_step
            clock::expiry_and_due_times_are_exact
            ordering::order_holds_after_every_return_to_ready
            ordering::priority_holds_after_every_return_to_ready
            ordering::returns_wait_behind_earlier_items
            limits::concurrency_limit_holds_under_race
            limits::rate_limit_holds_per_window
            limits::rate_counts_only_leased_items
            limits::rate_window_outlives_a_change_not_a_clear
            limits::retry_after_names_the_binding_limit
            limits::reap_frees_limited_slots
            limits::every_exit_frees_a_slot
            limits::limits_are_per_queue
            limits::clearing_limits_restores_claims
            schedules::schedulers_race_one_item_per_tick
            schedules::scheduler_runtimes_race_and_restart
            schedules::clock_skew_cannot_fire_early
            schedules::schedule_changes_take_effect
            schedules::every_change_of_a_schedule_is_a_revision
            schedules::unique_for_holds_after_ack
            listing::listed_while_holding_items
            listing::every_item_path_lists_the_queue
            listing::listing_shows_exactly_the_filled_queues
            listing::racing_calls_leave_no_phantom_and_hide_nothing
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __suite_tests {
    (($factory:expr) $($module:ident :: $check:ident)*) => {
        $(
            #[test]
            fn $check() {
                let factory = $factory;
                let result = $crate::runner::block_on($crate::checks::$module::$check(&factory));
                $crate::runner::conclude_at(
                    stringify!($check),
                    concat!("leaseq-conformance: src/checks/", stringify!($module), ".rs"),
                    $crate::BackendFactory::name(&factory),
                    result,
                );
            }
        )*
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __check_names {
    (() $($module:ident :: $check:ident)*) => {
        &[$(concat!(stringify!($module), "::", stringify!($check))),*]
    };
}

/// Every check in the suite, as `"module::name"`.
pub const CHECKS: &[&str] = __with_checks!(__check_names!());

/// Expands to one `#[test]` per check against the factory built by the
/// expression (evaluated once per check). Each test runs its check on a
/// four-thread runtime, prints skips, and panics with the violation on a
/// failure. See the crate docs for a complete test file.
///
/// `suite!(factory, model_cases = N)` runs the reference model with `N`
/// random sequences instead of 32: for a layer over a server whose model
/// runs elsewhere at full length (the sharding layer is modelled over
/// memory with 32), so CI's time goes to what only this pairing shows.
#[macro_export]
macro_rules! suite {
    (@model $factory:expr, $config:expr) => {
        $crate::__with_checks!(__suite_tests!($factory));

        /// The reference model: random operation sequences compared step
        /// by step with a pure model of the contract
        /// (`LEASEQ_MODEL_CASES` cases, else the suite's own count: 256
        /// on a manual clock, 32 on a real one, unless the test file says
        /// `model_cases = N`).
        #[test]
        fn reference_model() {
            let factory = $factory;
            let config = $config.max_steps(40);
            let result = $crate::model::check_model(&factory, &config);
            $crate::runner::conclude_at(
                "reference_model",
                "leaseq-conformance: src/model/",
                $crate::BackendFactory::name(&factory),
                result,
            );
        }
    };
    ($factory:expr) => {
        $crate::suite!(@model $factory, $crate::model::ModelConfig::suite_default());
    };
    ($factory:expr, model_cases = $cases:expr) => {
        $crate::suite!(@model $factory, $crate::model::ModelConfig::from_env($cases));
    };
}
