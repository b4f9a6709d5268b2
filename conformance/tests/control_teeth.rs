//! The control and registry checks have teeth: against backends with a
//! seeded fault in those groups they report a violation of the right
//! clause, every run; against the same wrapper without a fault they pass.

mod control_teeth {
    pub(crate) mod faulty;
}

use std::sync::Arc;

use control_teeth::faulty::{Fault, Faulty};
use leaseq_conformance::checks::{control, registry};
use leaseq_conformance::runner::block_on;
use leaseq_conformance::{BackendFactory, CheckResult, Outcome, Rule, TestBackend, Unavailable};
use leaseq_core::ManualClock;
use leaseq_memory::MemoryBackend;

/// How many times each detection is repeated: it must hold every time.
const RUNS: usize = 5;

struct FaultyFactory(Fault);

#[leaseq_core::async_trait]
impl BackendFactory for FaultyFactory {
    fn name(&self) -> &str {
        "control-faulty-memory"
    }
    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let clock = ManualClock::new();
        let inner = MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks();
        let b = Faulty::new(Arc::new(inner), self.0);
        Ok(TestBackend::manual(Arc::new(b), clock))
    }
}

/// Runs `check` RUNS times; each run must report `rule`.
fn caught<F, Fut>(what: &str, rule: Rule, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = CheckResult>,
{
    for run in 0..RUNS {
        match block_on(check()) {
            Err(v) if v.rule == rule => eprintln!("caught {what} (run {run}): {v}"),
            Err(v) => panic!("{what} (run {run}): reported {v}, expected {rule:?}"),
            Ok(o) => panic!("{what} (run {run}): the suite let it through: {o:?}"),
        }
    }
}

const CANCEL: Rule = Rule::Contract("cancel");

#[test]
fn a_cancel_that_reads_then_removes_is_caught_by_racing_cancels() {
    let f = FaultyFactory(Fault::CancelReadThenRemove);
    caught("cancel in two steps, racing cancels", CANCEL, || {
        control::racing_cancels_answer_once(&f)
    });
}

#[test]
fn a_cancel_that_reads_then_removes_is_caught_by_racing_claims() {
    let f = FaultyFactory(Fault::CancelReadThenRemove);
    caught("cancel in two steps, racing claims", CANCEL, || {
        control::cancel_races_claims(&f)
    });
}

#[test]
fn a_cancel_that_misreports_the_state_is_caught() {
    let f = FaultyFactory(Fault::CancelAnswersReady);
    caught("cancel answering Ready", CANCEL, || {
        control::cancel_ends_waiting_items_at_once(&f)
    });
}

#[test]
fn a_reap_that_ignores_cancel_requests_is_caught() {
    let f = FaultyFactory(Fault::ReapIgnoresCancel);
    caught("reap requeueing a cancel-requested lease", CANCEL, || {
        control::cancelled_lease_ends_whatever_it_reports(&f)
    });
}

#[test]
fn a_reap_that_ignores_cancel_requests_is_caught_by_the_race() {
    let f = FaultyFactory(Fault::ReapIgnoresCancel);
    caught(
        "reap requeueing cancel-requested leases in a race",
        CANCEL,
        || control::cancel_races_ack_and_reap(&f),
    );
}

#[test]
fn a_pause_seen_late_is_caught() {
    let f = FaultyFactory(Fault::PauseSeenLate);
    caught("a cached pause", Rule::Contract("pause"), || {
        control::pause_holds_every_claim(&f)
    });
}

#[test]
fn a_pause_seen_late_is_caught_by_racing_claims() {
    let f = FaultyFactory(Fault::PauseSeenLate);
    caught(
        "a cached pause, racing claims",
        Rule::Contract("pause"),
        || control::pause_races_claims(&f),
    );
}

#[test]
fn a_snooze_that_spends_the_attempt_is_caught() {
    let f = FaultyFactory(Fault::SnoozeSpendsAttempt);
    caught("snooze as a release", Rule::Contract("snooze"), || {
        control::snooze_spends_no_attempt(&f)
    });
}

#[test]
fn unfenced_progress_is_caught() {
    let f = FaultyFactory(Fault::ProgressUnfenced);
    caught("progress by item id", Rule::Inv3, || {
        control::progress_is_fenced_and_per_lease(&f)
    });
}

#[test]
fn an_unbounded_run_all_now_is_caught() {
    let f = FaultyFactory(Fault::RunAllNowUnbounded);
    caught(
        "run_all_now without its limit",
        Rule::Contract("run_now"),
        || control::run_now_moves_waiting_items(&f),
    );
}

#[test]
fn a_registry_that_never_expires_is_caught() {
    let f = FaultyFactory(Fault::RegistryNeverExpires);
    caught(
        "entries kept for good",
        Rule::Contract("WorkerRegistry"),
        || registry::registry_lists_live_workers(&f),
    );
}

#[test]
fn a_silent_cancel_signal_is_caught() {
    let f = FaultyFactory(Fault::CancelSignalSilent);
    caught("a cancel signal that never fires", CANCEL, || {
        control::cancel_signal_reaches_the_holder(&f)
    });
}

fn passes(what: &str, result: CheckResult) {
    assert_eq!(result, Ok(Outcome::Passed), "{what}");
}

#[test]
fn the_wrapper_without_a_fault_passes_every_control_check() {
    let f = FaultyFactory(Fault::None);
    passes(
        "cancel_ends_waiting_items_at_once",
        block_on(control::cancel_ends_waiting_items_at_once(&f)),
    );
    passes(
        "cancelled_lease_ends_whatever_it_reports",
        block_on(control::cancelled_lease_ends_whatever_it_reports(&f)),
    );
    passes(
        "cancel_races_claims",
        block_on(control::cancel_races_claims(&f)),
    );
    passes(
        "cancel_races_ack_and_reap",
        block_on(control::cancel_races_ack_and_reap(&f)),
    );
    passes(
        "racing_cancels_answer_once",
        block_on(control::racing_cancels_answer_once(&f)),
    );
    passes(
        "cancel_signal_reaches_the_holder",
        block_on(control::cancel_signal_reaches_the_holder(&f)),
    );
    passes(
        "pause_holds_every_claim",
        block_on(control::pause_holds_every_claim(&f)),
    );
    passes(
        "pause_races_claims",
        block_on(control::pause_races_claims(&f)),
    );
    passes(
        "snooze_spends_no_attempt",
        block_on(control::snooze_spends_no_attempt(&f)),
    );
    passes(
        "run_now_moves_waiting_items",
        block_on(control::run_now_moves_waiting_items(&f)),
    );
    passes(
        "progress_is_fenced_and_per_lease",
        block_on(control::progress_is_fenced_and_per_lease(&f)),
    );
    passes(
        "registry_lists_live_workers",
        block_on(registry::registry_lists_live_workers(&f)),
    );
}
