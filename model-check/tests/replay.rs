//! The counterexamples of the old protocol (`Today`), replayed against the
//! memory backend, which follows the fixed protocol, and against SQLite
//! and Redis, which follow the takeover protocol: every answer the code
//! gives matches the model's, and the answers that made the defects are
//! gone. The counterexample of a seeded fault of the takeover protocol (a
//! claim that keeps the takeover trace), replayed on SQLite and Redis,
//! gets the true answer from the code.

use leaseq_core::ItemState;
use leaseq_model_check::{
    check, replay_on_memory, replay_on_redis, replay_on_sqlite, Action, Bounds, Faults, LeaseModel,
    Protocol, NO_DEAD_WITHOUT_RUN, TRUE_OUTCOMES,
};
use leaseq_redis::RedisOptions;
use leaseq_testkit::env::{redis_url, skip, tag};
use leaseq_testkit::redis_prefix::PrefixGuard;

#[test]
fn misreported_ack_replays_on_the_memory_backend() {
    let today = LeaseModel::new(Protocol::Today, Bounds::ci());
    let path = check(&today, TRUE_OUTCOMES).discovery.expect("found");
    let fixed = LeaseModel::new(Protocol::Fixed, Bounds::ci());
    let replayed = replay_on_memory(&fixed, &path).expect("the backend answers as the model");
    eprintln!("{}", replayed.lines.join("\n"));
    // The ack landed past the lease's expiry; its trace answers Finished.
    assert!(
        replayed
            .lines
            .last()
            .expect("lines")
            .contains("lease_fate -> Finished"),
        "{:?}",
        replayed.lines
    );
    assert_eq!(replayed.items, vec![None, Some(ItemState::Ready)]);
}

#[test]
fn dead_without_a_run_replays_on_the_memory_backend() {
    let today = LeaseModel::new(Protocol::Today, Bounds::ci());
    let path = check(&today, NO_DEAD_WITHOUT_RUN).discovery.expect("found");
    let fixed = LeaseModel::new(Protocol::Fixed, Bounds::ci());
    // Up to the recovery: the reap that followed it finds nothing to take.
    let replayed = replay_on_memory(&fixed, &path[..4]).expect("the backend answers as the model");
    eprintln!("{}", replayed.lines.join("\n"));
    // The expired, unreaped lease is recovered, not left to a reaper.
    assert!(
        !replayed.lines[3].ends_with("recover_claim -> []"),
        "{:?}",
        replayed.lines
    );
    assert_ne!(replayed.items.first(), Some(&Some(ItemState::Dead)));
}

#[test]
fn a_replay_that_disagrees_is_reported() {
    // The path ends in a reap that the fixed protocol's recover_claim left
    // nothing to take: the model does not enable it, and the replay says
    // so rather than run it.
    let fixed = LeaseModel::new(Protocol::Fixed, Bounds::ci());
    let today = LeaseModel::new(Protocol::Today, Bounds::ci());
    let path = check(&today, NO_DEAD_WITHOUT_RUN).discovery.expect("found");
    let e = replay_on_memory(&fixed, &path).expect_err("refused");
    assert!(e.contains("step 5"), "{e}");
}

#[test]
fn misreported_ack_replays_on_redis() {
    // Redis keeps takeover traces, as SQLite does: no reap took the lease,
    // so the landed ack is answered Finished on the server too, on the
    // server's clock.
    let today = LeaseModel::new(Protocol::Today, Bounds::ci());
    let path = check(&today, TRUE_OUTCOMES).discovery.expect("found");
    let takeovers = LeaseModel::new(Protocol::Takeovers, Bounds::ci());
    let url = redis_url();
    let guard = PrefixGuard {
        url: url.clone(),
        prefix: format!("model-replay-{}", tag()),
    };
    let options = RedisOptions::new(&url).prefix(guard.prefix.clone());
    let replayed = match replay_on_redis(&takeovers, &path, options) {
        Err(e) if e.starts_with("connect:") => return skip(&format!("Redis at {url}"), e),
        r => r.expect("Redis answers as the model"),
    };
    eprintln!("{}", replayed.lines.join("\n"));
    assert!(
        replayed
            .lines
            .last()
            .expect("lines")
            .contains("lease_fate -> Finished"),
        "{:?}",
        replayed.lines
    );
    assert_eq!(replayed.items, vec![None, Some(ItemState::Ready)]);
}

#[test]
fn dead_without_a_run_replays_on_redis() {
    let today = LeaseModel::new(Protocol::Today, Bounds::ci());
    let path = check(&today, NO_DEAD_WITHOUT_RUN).discovery.expect("found");
    let takeovers = LeaseModel::new(Protocol::Takeovers, Bounds::ci());
    let url = redis_url();
    let guard = PrefixGuard {
        url: url.clone(),
        prefix: format!("model-replay-{}", tag()),
    };
    let options = RedisOptions::new(&url).prefix(guard.prefix.clone());
    // Up to the recovery, as on the memory backend.
    let replayed = match replay_on_redis(&takeovers, &path[..4], options) {
        Err(e) if e.starts_with("connect:") => return skip(&format!("Redis at {url}"), e),
        r => r.expect("Redis answers as the model"),
    };
    eprintln!("{}", replayed.lines.join("\n"));
    assert!(
        !replayed.lines[3].ends_with("recover_claim -> []"),
        "{:?}",
        replayed.lines
    );
    assert_eq!(replayed.items.first(), Some(&Some(ItemState::Leased)));
}

#[test]
fn misreported_ack_replays_on_sqlite() {
    let today = LeaseModel::new(Protocol::Today, Bounds::ci());
    let path = check(&today, TRUE_OUTCOMES).discovery.expect("found");
    let takeovers = LeaseModel::new(Protocol::Takeovers, Bounds::ci());
    let replayed = replay_on_sqlite(&takeovers, &path).expect("SQLite answers as the model");
    eprintln!("{}", replayed.lines.join("\n"));
    // No reap took the lease: no takeover trace, so its own call ended it.
    assert!(
        replayed
            .lines
            .last()
            .expect("lines")
            .contains("lease_fate -> Finished"),
        "{:?}",
        replayed.lines
    );
    assert_eq!(replayed.items, vec![None, Some(ItemState::Ready)]);
}

/// The counterexample of the seeded fault "a claim that keeps the takeover
/// trace": a claim sent again leases item 1 under the token a
/// reaper took before, and that lease's landed ack (reply lost) is
/// answered Lost by the faulty model at its last step.
fn claim_keeps_trace_counterexample() -> Vec<Action> {
    let faults = Faults {
        claim_keeps_takeover_trace: true,
        ..Faults::default()
    };
    let faulty = LeaseModel::new(Protocol::Takeovers, Bounds::two_losses()).faults(faults);
    let path = check(&faulty, TRUE_OUTCOMES).discovery.expect("found");
    let trace = faulty.trace(&path);
    assert!(
        trace.contains("-> Lost => reports item 1 (w1#0.0) LeaseLost"),
        "{trace}"
    );
    path
}

#[test]
fn sqlite_does_not_follow_a_claim_that_keeps_the_takeover_trace() {
    // The seeded fault's counterexample, replayed on SQLite against the
    // takeover protocol: every answer is the model's, and where the faulty
    // model answered Lost the backend answers Finished: the claim sent
    // again dropped the trace of the first lease under w1#0.0.
    let path = claim_keeps_trace_counterexample();
    let model = LeaseModel::new(Protocol::Takeovers, Bounds::two_losses());
    let replayed = replay_on_sqlite(&model, &path).expect("SQLite answers as the model");
    eprintln!("{}", replayed.lines.join("\n"));
    assert_eq!(replayed.lines.len(), 12);
    assert!(
        replayed.lines[6].contains("claim -> ["),
        "{:?}",
        replayed.lines
    );
    assert!(
        replayed.lines[11].ends_with("lease_fate -> Finished"),
        "{:?}",
        replayed.lines
    );
    assert_eq!(replayed.items, vec![Some(ItemState::Dead), None]);
}

#[test]
fn a_claim_sent_again_under_a_reaped_token_is_answered_truly_on_redis() {
    // The same calls on Redis: the claim sent again dropped the takeover
    // trace of the first lease under w1#0.0, so this ack is Finished.
    let path = claim_keeps_trace_counterexample();
    let takeovers = LeaseModel::new(Protocol::Takeovers, Bounds::two_losses());
    let url = redis_url();
    let guard = PrefixGuard {
        url: url.clone(),
        prefix: format!("model-replay-{}", tag()),
    };
    let options = RedisOptions::new(&url).prefix(guard.prefix.clone());
    let replayed = match replay_on_redis(&takeovers, &path, options) {
        Err(e) if e.starts_with("connect:") => return skip(&format!("Redis at {url}"), e),
        r => r.expect("Redis answers as the model"),
    };
    eprintln!("{}", replayed.lines.join("\n"));
    assert!(
        replayed.lines[11].ends_with("lease_fate -> Finished"),
        "{:?}",
        replayed.lines
    );
    assert_eq!(replayed.items, vec![Some(ItemState::Dead), None]);
}

#[test]
fn a_backend_with_other_lease_traces_is_refused() {
    // SQLite keeps takeover traces, memory finishing traces: a path of one
    // protocol is not replayed on the other's backend.
    let path = check(
        &LeaseModel::new(Protocol::Today, Bounds::ci()),
        TRUE_OUTCOMES,
    )
    .discovery
    .expect("found");
    let fixed = LeaseModel::new(Protocol::Fixed, Bounds::ci());
    let takeovers = LeaseModel::new(Protocol::Takeovers, Bounds::ci());
    assert!(replay_on_sqlite(&fixed, &path).is_err());
    assert!(replay_on_memory(&takeovers, &path).is_err());
}
