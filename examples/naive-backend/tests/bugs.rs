//! Each seeded bug, run through the checks a backend author would run for
//! it: the suite fails, and its message names the check's file and the
//! mistake in the backend's terms, not a symptom of it.

use std::sync::Arc;

use leaseq_conformance::model::{check_model, ModelConfig};
use leaseq_conformance::runner::{block_on, failure_message};
use leaseq_conformance::{checks, BackendFactory, CheckResult, Outcome, TestBackend, Unavailable};
use leaseq_core::{ManualClock, SystemClock};
use leaseq_example_naive::{Bug, NaiveBackend};

/// A fresh naive backend with `bug` per check, on a manual clock or the
/// system clock.
struct Naive {
    bug: Bug,
    real_clock: bool,
}

#[leaseq_core::async_trait]
impl BackendFactory for Naive {
    fn name(&self) -> &str {
        "naive"
    }

    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        if self.real_clock {
            let b = NaiveBackend::new(Arc::new(SystemClock), self.bug).with_test_hooks();
            return Ok(TestBackend::real(Arc::new(b)));
        }
        let clock = ManualClock::new();
        let b = NaiveBackend::new(Arc::new(clock.clone()), self.bug).with_test_hooks();
        Ok(TestBackend::manual(Arc::new(b), clock))
    }
}

fn manual(bug: Bug) -> Naive {
    Naive {
        bug,
        real_clock: false,
    }
}

fn real(bug: Bug) -> Naive {
    Naive {
        bug,
        real_clock: true,
    }
}

/// The message the suite fails `check` (in `file`) with; a pass fails the
/// test.
fn message(check: &str, file: &str, result: CheckResult) -> String {
    match result {
        Err(v) => {
            let msg = failure_message(check, file, "naive", &v);
            eprintln!("{msg}");
            msg
        }
        Ok(o) => panic!("{check} let the bug through: {o:?}"),
    }
}

/// Runs `module::check` against `factory`; the message it fails with.
macro_rules! failure {
    ($factory:expr, $module:ident :: $check:ident) => {
        message(
            stringify!($check),
            concat!(
                "leaseq-conformance: src/checks/",
                stringify!($module),
                ".rs"
            ),
            block_on(checks::$module::$check(&$factory)),
        )
    };
}

/// The reference model against `factory`; the message it fails with.
fn model_failure(factory: &Naive) -> String {
    let config = ModelConfig::new(64).max_steps(40);
    message(
        "reference_model",
        "leaseq-conformance: src/model/",
        check_model(factory, &config),
    )
}

/// Fails unless `msg` contains every one of `words`.
fn names(msg: &str, words: &[&str]) {
    for w in words {
        assert!(msg.contains(w), "the message does not say {w:?}: {msg}");
    }
}

#[test]
fn queues_not_isolated() {
    let msg = failure!(manual(Bug::SharedDedupKeys), isolation::queues_are_isolated);
    names(
        &msg,
        &[
            "src/checks/isolation.rs",
            "contract of queue isolation",
            "a dedup key held in one queue deduplicated an item of another queue",
        ],
    );
}

#[test]
fn a_clock_that_ticks_once_a_second() {
    let msg = failure!(real(Bug::SecondsClock), isolation::clock_follows_real_time);
    names(
        &msg,
        &[
            "src/checks/isolation.rs",
            "contract of now",
            "the clock is too coarse",
        ],
    );
}

#[test]
fn a_repair_where_no_corruption_was_planted() {
    let msg = failure!(
        manual(Bug::StrayEntryAfterReap),
        lifecycle::reap_requeues_expired
    );
    names(
        &msg,
        &[
            "src/checks/lifecycle.rs",
            "a repair where no corruption was planted",
            "left a stray or dangling index entry",
        ],
    );
}

#[test]
fn a_reaper_that_scans_every_live_lease() {
    let msg = failure!(
        manual(Bug::ScanningReap),
        reap_cost::reap_cost_ignores_live_leases
    );
    names(
        &msg,
        &[
            "src/checks/reap_cost.rs",
            "INV-7",
            "reap visits live leases",
        ],
    );
}

#[test]
fn order_lost_after_a_release() {
    let msg = failure!(
        manual(Bug::ReleaseToBack),
        ordering::order_holds_after_every_return_to_ready
    );
    names(
        &msg,
        &[
            "src/checks/ordering.rs",
            "INV-8",
            "after releases, claim order",
            "is not enqueue order",
        ],
    );
}

#[test]
fn a_hostile_input_accepted() {
    let msg = failure!(
        manual(Bug::UncappedPeek),
        input::hostile_inputs_have_one_answer
    );
    names(
        &msg,
        &[
            "src/checks/input.rs",
            "contract of hostile input",
            "expected MAX_PEEK",
        ],
    );
}

#[test]
fn a_clock_read_outside_the_atomic_step() {
    let msg = failure!(
        manual(Bug::ClockReadOutsideStep),
        clock::claims_read_the_clock_in_their_step
    );
    names(
        &msg,
        &[
            "src/checks/clock.rs",
            "contract of now",
            "a clock read outside the atomic step",
        ],
    );
}

#[test]
fn an_expire_hook_that_touches_expired_leases() {
    let msg = model_failure(&manual(Bug::ExpireHookTouchesExpired));
    names(
        &msg,
        &[
            "src/model/",
            "contract of TestHooks::expire_leases",
            "touched a lease that had already expired",
        ],
    );
}

#[test]
fn a_reap_that_leaves_the_item_in_the_leased_index() {
    let msg = failure!(
        manual(Bug::ReapLeavesLeasedEntry),
        lifecycle::reap_requeues_expired
    );
    names(
        &msg,
        &[
            "src/checks/lifecycle.rs",
            "INV-4",
            "a recovered lease stays in the Leased index",
        ],
    );
}

/// Without a bug the same checks pass: each failure above is its bug's.
#[test]
fn the_same_checks_pass_without_a_bug() {
    let (m, r) = (manual(Bug::None), real(Bug::None));
    for (what, result) in [
        (
            "queues_are_isolated",
            block_on(checks::isolation::queues_are_isolated(&m)),
        ),
        (
            "clock_follows_real_time",
            block_on(checks::isolation::clock_follows_real_time(&r)),
        ),
        (
            "reap_requeues_expired",
            block_on(checks::lifecycle::reap_requeues_expired(&m)),
        ),
        (
            "reap_cost_ignores_live_leases",
            block_on(checks::reap_cost::reap_cost_ignores_live_leases(&m)),
        ),
        (
            "order_holds_after_every_return_to_ready",
            block_on(checks::ordering::order_holds_after_every_return_to_ready(
                &m,
            )),
        ),
        (
            "hostile_inputs_have_one_answer",
            block_on(checks::input::hostile_inputs_have_one_answer(&m)),
        ),
        (
            "claims_read_the_clock_in_their_step",
            block_on(checks::clock::claims_read_the_clock_in_their_step(&m)),
        ),
        (
            "claims_read_the_clock_in_their_step, real clock",
            block_on(checks::clock::claims_read_the_clock_in_their_step(&r)),
        ),
        (
            "reference_model",
            check_model(&m, &ModelConfig::new(64).max_steps(40)),
        ),
    ] {
        assert_eq!(result, Ok(Outcome::Passed), "{what}");
    }
}
