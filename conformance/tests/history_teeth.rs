//! The history and events checks have teeth: against backends with a
//! seeded fault in the History or Events group (or where they meet the
//! core and the Admin group) they report a violation of its contract,
//! every run; against the same wrapper without a fault they pass.

mod history_teeth {
    mod admin;
    mod events;
    pub(crate) mod faulty;
    mod relay;
}

use std::sync::Arc;

use history_teeth::faulty::{Fault, Faulty};
use leaseq_conformance::checks::{collect_cost, events, history, history_interplay};
use leaseq_conformance::runner::block_on;
use leaseq_conformance::{BackendFactory, CheckResult, Outcome, Rule, TestBackend, Unavailable};
use leaseq_core::ManualClock;
use leaseq_memory::MemoryBackend;

/// How many times each detection is repeated: it must hold every time.
const RUNS: usize = 5;
const RULE: Rule = Rule::Contract("History");

struct FaultyFactory(Fault);

#[leaseq_core::async_trait]
impl BackendFactory for FaultyFactory {
    fn name(&self) -> &str {
        "history-faulty-memory"
    }
    async fn backend(&self) -> Result<TestBackend, Unavailable> {
        let clock = ManualClock::new();
        let inner = MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks();
        let b = Faulty::new(Arc::new(inner), self.0);
        Ok(TestBackend::manual(Arc::new(b), clock))
    }
}

/// Runs `check` RUNS times; each run must report the History contract.
fn caught<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = CheckResult>,
{
    for run in 0..RUNS {
        match block_on(check()) {
            Err(v) if v.rule == RULE => eprintln!("caught {what} (run {run}): {v}"),
            Err(v) => panic!("{what} (run {run}): reported {v}, expected {RULE:?}"),
            Ok(o) => panic!("{what} (run {run}): the suite let it through: {o:?}"),
        }
    }
}

#[test]
fn a_complete_that_drops_the_result_is_caught() {
    let f = FaultyFactory(Fault::CompleteDropsResult);
    caught("complete as a plain ack", || {
        history::kept_items_record_their_ending(&f)
    });
    caught("complete as a plain ack, awaited", || {
        history::wait_finished_answers_the_result(&f)
    });
}

#[test]
fn deaths_kept_as_completions_are_caught() {
    let f = FaultyFactory(Fault::DeathsKeptAsCompleted);
    caught("a dead letter read as kept completed, awaited", || {
        history::wait_finished_answers_the_result(&f)
    });
}

#[test]
fn a_listing_oldest_first_is_caught() {
    let f = FaultyFactory(Fault::OldestFirst);
    caught("oldest first", || {
        history::kept_items_record_their_ending(&f)
    });
    caught("oldest first, by count", || {
        history::retention_count_keeps_the_newest(&f)
    });
}

#[test]
fn a_count_bound_that_trims_nothing_is_caught() {
    let f = FaultyFactory(Fault::CountIgnored);
    caught("count ignored", || {
        history::retention_count_keeps_the_newest(&f)
    });
}

#[test]
fn a_collect_that_takes_everything_is_caught() {
    let f = FaultyFactory(Fault::CollectTakesAll);
    caught("collect of unexpired items", || {
        history::collect_removes_what_expired(&f)
    });
}

#[test]
fn a_collect_that_reads_every_kept_item_is_caught() {
    let f = FaultyFactory(Fault::ScanningCollect);
    caught("collect scanning the kept items", || {
        collect_cost::collect_cost_ignores_kept_items(&f)
    });
}

#[test]
fn unreadable_records_are_caught() {
    let f = FaultyFactory(Fault::RecordsUnreadable);
    caught("records not readable", || {
        history::kept_items_record_their_ending(&f)
    });
    caught("records not readable, awaited", || {
        history::wait_finished_answers_the_result(&f)
    });
}

#[test]
fn cancelled_items_read_as_completed_are_caught() {
    let f = FaultyFactory(Fault::CancelReadAsCompleted);
    caught("cancel read as completed", || {
        history::cancelled_items_are_kept_as_cancelled(&f)
    });
}

#[test]
fn a_policy_that_outlives_its_queue_is_caught() {
    let f = FaultyFactory(Fault::PolicyCached);
    caught("policy kept after delete_queue", || {
        history::purge_and_delete_take_the_history(&f)
    });
}

fn passes(what: &str, result: CheckResult) {
    assert_eq!(result, Ok(Outcome::Passed), "{what}");
}

#[test]
fn the_wrapper_without_a_fault_passes_every_history_check() {
    let f = FaultyFactory(Fault::None);
    passes(
        "kept_items_record_their_ending",
        block_on(history::kept_items_record_their_ending(&f)),
    );
    passes(
        "cancelled_items_are_kept_as_cancelled",
        block_on(history::cancelled_items_are_kept_as_cancelled(&f)),
    );
    passes(
        "retention_count_keeps_the_newest",
        block_on(history::retention_count_keeps_the_newest(&f)),
    );
    passes(
        "collect_removes_what_expired",
        block_on(history::collect_removes_what_expired(&f)),
    );
    passes(
        "purge_and_delete_take_the_history",
        block_on(history::purge_and_delete_take_the_history(&f)),
    );
    passes(
        "wait_finished_answers_the_result",
        block_on(history::wait_finished_answers_the_result(&f)),
    );
    passes(
        "completions_are_counted",
        block_on(history::completions_are_counted(&f)),
    );
    passes(
        "dead_letters_go_by_their_bound",
        block_on(history::dead_letters_go_by_their_bound(&f)),
    );
    passes(
        "collect_cost_ignores_kept_items",
        block_on(collect_cost::collect_cost_ignores_kept_items(&f)),
    );
    passes(
        "unique_for_holds_as_without_history",
        block_on(history_interplay::unique_for_holds_as_without_history(&f)),
    );
    passes(
        "redriven_letters_leave_the_dead_bound",
        block_on(history_interplay::redriven_letters_leave_the_dead_bound(&f)),
    );
    passes(
        "events_report_each_change",
        block_on(events::events_report_each_change(&f)),
    );
    passes(
        "a_slow_subscriber_lags_and_goes_on",
        block_on(events::a_slow_subscriber_lags_and_goes_on(&f)),
    );
}

#[test]
fn completions_left_uncounted_are_caught() {
    let f = FaultyFactory(Fault::CompletionsUncounted);
    caught("completions uncounted", || {
        history::completions_are_counted(&f)
    });
}

#[test]
fn dead_letters_kept_past_their_bound_are_caught() {
    let f = FaultyFactory(Fault::DeadUnbounded);
    caught("dead letters unbounded", || {
        history::dead_letters_go_by_their_bound(&f)
    });
}

const EVENTS: Rule = Rule::Contract("Events");

/// Runs `check` RUNS times; each run must report the Events contract.
fn caught_events<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = CheckResult>,
{
    for run in 0..RUNS {
        match block_on(check()) {
            Err(v) if v.rule == EVENTS => eprintln!("caught {what} (run {run}): {v}"),
            Err(v) => panic!("{what} (run {run}): reported {v}, expected {EVENTS:?}"),
            Ok(o) => panic!("{what} (run {run}): the suite let it through: {o:?}"),
        }
    }
}

#[test]
fn silent_events_are_caught() {
    let f = FaultyFactory(Fault::EventsSilent);
    // Each run ends by the check's wait for an event that never comes (10
    // s): once per check is enough to show it, and it is the same each time.
    for (what, result) in [
        ("no event", block_on(events::events_report_each_change(&f))),
        (
            "no event, flooded",
            block_on(events::a_slow_subscriber_lags_and_goes_on(&f)),
        ),
    ] {
        match result {
            Err(v) if v.rule == EVENTS => eprintln!("caught {what}: {v}"),
            other => panic!("{what}: expected a violation of {EVENTS:?}, got {other:?}"),
        }
    }
}

#[test]
fn events_naming_the_wrong_job_are_caught() {
    let f = FaultyFactory(Fault::EventsOffByOne);
    caught_events("wrong ids", || events::events_report_each_change(&f));
    caught_events("wrong ids, flooded", || {
        events::a_slow_subscriber_lags_and_goes_on(&f)
    });
}

#[test]
fn a_purge_that_leaves_the_history_is_caught() {
    let f = FaultyFactory(Fault::PurgeKeepsHistory);
    caught("purge keeps kept items", || {
        history::purge_and_delete_take_the_history(&f)
    });
}

#[test]
fn a_queue_listed_for_its_history_is_caught() {
    let f = FaultyFactory(Fault::HistoryOnlyQueueListed);
    caught("a queue of kept items listed", || {
        history::purge_and_delete_take_the_history(&f)
    });
}

#[test]
fn a_kept_item_holding_its_key_is_caught() {
    let f = FaultyFactory(Fault::KeptHoldsKey);
    caught("a kept item holds its key", || {
        history::kept_items_record_their_ending(&f)
    });
    caught("a kept item holds its key, beside unique_for", || {
        history_interplay::unique_for_holds_as_without_history(&f)
    });
}

#[test]
fn a_result_over_the_bound_accepted_is_caught() {
    let f = FaultyFactory(Fault::ResultUnbounded);
    caught("a result over the bound cut and kept", || {
        history::kept_items_record_their_ending(&f)
    });
}

#[test]
fn a_stale_complete_accepted_is_caught() {
    let f = FaultyFactory(Fault::StaleCompleteAccepted);
    caught("a stale complete answered Ok", || {
        history::kept_items_record_their_ending(&f)
    });
}

#[test]
fn releases_and_fails_counted_as_completions_are_caught() {
    let f = FaultyFactory(Fault::CountsReleases);
    caught("releases and fails counted", || {
        history::completions_are_counted(&f)
    });
}

#[test]
fn a_purge_that_resets_the_completion_count_is_caught() {
    let f = FaultyFactory(Fault::PurgeResetsCount);
    caught("purge resets the count", || {
        history::completions_are_counted(&f)
    });
}

#[test]
fn a_redriven_item_left_under_the_dead_bound_is_caught() {
    let f = FaultyFactory(Fault::RedrivenStillDead);
    caught("a redriven item collected as a dead letter", || {
        history_interplay::redriven_letters_leave_the_dead_bound(&f)
    });
}

#[test]
fn a_dropped_event_kind_is_caught() {
    let f = FaultyFactory(Fault::EventsDropReleased);
    // Each run ends by the check's wait for the missing event (10 s).
    caught_events("no Released", || events::events_report_each_change(&f));
}

#[test]
fn duplicated_events_are_caught() {
    let f = FaultyFactory(Fault::EventsDuplicated);
    caught_events("every event twice", || {
        events::events_report_each_change(&f)
    });
}

#[test]
fn an_event_for_a_deduplicated_enqueue_is_caught() {
    let f = FaultyFactory(Fault::EventsForDedup);
    caught_events("Enqueued for a deduplicated enqueue", || {
        events::events_report_each_change(&f)
    });
}

#[test]
fn events_for_a_redrive_and_a_removal_are_caught() {
    let f = FaultyFactory(Fault::EventsForAdmin);
    caught_events("events for a redrive and a removal", || {
        events::events_report_each_change(&f)
    });
}

#[test]
fn a_stream_that_never_lags_is_caught_for_its_bound() {
    let f = FaultyFactory(Fault::EventsUnbounded);
    for run in 0..RUNS {
        match block_on(events::a_slow_subscriber_lags_and_goes_on(&f)) {
            Err(v) if v.rule == EVENTS && v.to_string().contains("more than the bound") => {
                eprintln!("caught a stream that never lags (run {run}): {v}")
            }
            other => panic!(
                "a stream that never lags (run {run}): expected a violation of {EVENTS:?} \
                 for holding more than the bound, got {other:?}"
            ),
        }
    }
}
