//! The scheduler runtime on the memory backend's manual clock: missed-tick
//! policies, changes and removals picked up by a running scheduler.

use leaseq_core::BackendExt as _;
use std::sync::Arc;
use std::time::Duration;

use leaseq_core::schedule::{Missed, Schedule, Scheduler};
use leaseq_core::{Backend, ClaimSpec, ManualClock, QueueName};
use leaseq_memory::MemoryBackend;

const HOUR: Duration = Duration::from_secs(3600);

fn setup() -> (Arc<dyn Backend>, ManualClock, QueueName) {
    let clock = ManualClock::new();
    let b: Arc<dyn Backend> = Arc::new(MemoryBackend::with_clock(Arc::new(clock.clone())));
    (b, clock, QueueName::new("periodic").expect("queue"))
}

async fn payloads(b: &dyn Backend, q: &QueueName) -> Vec<String> {
    let spec = ClaimSpec::new(100, Duration::from_secs(60)).expect("spec");
    let claimed = b.claim(q, spec).await.expect("claim");
    for l in &claimed.leases {
        b.ack(&l.key).await.expect("ack");
    }
    claimed
        .leases
        .iter()
        .map(|l| String::from_utf8_lossy(&l.payload).into_owned())
        .collect()
}

/// An hourly schedule whose scheduler was down for three and a half hours:
/// with `Skip` the missed ticks are skipped and the next one fires; with
/// `EnqueueLatest` one item comes for the latest missed tick.
async fn after_an_outage(missed: Missed) -> (usize, usize) {
    let (b, clock, q) = setup();
    let s = Schedule::every("hourly", q.clone(), HOUR, "run")
        .expect("schedule")
        .missed(missed);
    b.schedule_store()
        .expect("schedule_store")
        .put_schedule(&s)
        .await
        .expect("put");
    let mut scheduler = Scheduler::new(b.clone());
    let pass = scheduler.run_once().await.expect("pass");
    assert!(pass.fired.is_empty(), "nothing is due at once: {pass:?}");
    let next = pass.next_due.expect("a next tick");
    clock.advance(next.saturating_since(pass.now) + Duration::from_secs(1));
    let pass = scheduler.run_once().await.expect("pass");
    assert_eq!(pass.fired.len(), 1, "the tick on time fires: {pass:?}");
    assert_eq!(payloads(b.as_ref(), &q).await, ["run"]);
    // The outage: no scheduler runs for 3.5 hours.
    drop(scheduler);
    clock.advance(HOUR * 7 / 2);
    let mut scheduler = Scheduler::new(b.clone());
    let pass = scheduler.run_once().await.expect("pass");
    let after_outage = pass.fired.len();
    let skipped = pass.skipped.len();
    assert_eq!(payloads(b.as_ref(), &q).await.len(), after_outage);
    // The next tick fires whatever the policy.
    let next = pass.next_due.expect("a next tick");
    clock.advance(next.saturating_since(pass.now) + Duration::from_secs(1));
    let pass = scheduler.run_once().await.expect("pass");
    assert_eq!(pass.fired.len(), 1, "the next tick fires: {pass:?}");
    (after_outage, skipped)
}

#[tokio::test]
async fn skip_drops_missed_ticks() {
    assert_eq!(after_an_outage(Missed::Skip).await, (0, 1));
}

#[tokio::test]
async fn enqueue_latest_runs_once_for_the_missed_ticks() {
    assert_eq!(after_an_outage(Missed::EnqueueLatest).await, (1, 0));
}

#[tokio::test]
async fn a_running_scheduler_picks_up_changes_and_removals() {
    let (b, clock, q) = setup();
    let v1 = Schedule::every("s", q.clone(), Duration::from_secs(10), "v1").expect("schedule");
    b.schedule_store()
        .expect("schedule_store")
        .put_schedule(&v1)
        .await
        .expect("put");
    // Reloads only when a fire finds its definition stale.
    let mut scheduler = Scheduler::new(b.clone()).reload_every(HOUR);
    scheduler.run_once().await.expect("pass");
    clock.advance(Duration::from_secs(11));
    assert_eq!(scheduler.run_once().await.expect("pass").fired.len(), 1);
    assert_eq!(payloads(b.as_ref(), &q).await, ["v1"]);

    let v2 = Schedule::every("s", q.clone(), Duration::from_secs(10), "v2").expect("schedule");
    b.schedule_store()
        .expect("schedule_store")
        .put_schedule(&v2)
        .await
        .expect("put");
    clock.advance(Duration::from_secs(10));
    // The first pass meets the stale revision and fires nothing; the next
    // reloads and fires the new definition.
    let first = scheduler.run_once().await.expect("pass");
    assert!(first.fired.is_empty(), "{first:?}");
    let second = scheduler.run_once().await.expect("pass");
    assert_eq!(second.fired.len(), 1, "{second:?}");
    assert_eq!(payloads(b.as_ref(), &q).await, ["v2"]);

    assert!(b
        .schedule_store()
        .expect("schedule_store")
        .remove_schedule(v2.name())
        .await
        .expect("remove"));
    clock.advance(Duration::from_secs(10));
    for _ in 0..3 {
        let pass = scheduler.run_once().await.expect("pass");
        assert!(pass.fired.is_empty(), "a removed schedule fired: {pass:?}");
    }
    assert_eq!(scheduler.loaded().count(), 0);
    assert!(payloads(b.as_ref(), &q).await.is_empty());
}

#[tokio::test]
async fn a_tick_fires_once_however_many_schedulers_pass() {
    let (b, clock, q) = setup();
    let s = Schedule::cron("minutely", q.clone(), "* * * * *", "tick").expect("schedule");
    b.schedule_store()
        .expect("schedule_store")
        .put_schedule(&s)
        .await
        .expect("put");
    let mut schedulers: Vec<Scheduler> = (0..4).map(|_| Scheduler::new(b.clone())).collect();
    let mut fired = 0;
    for _ in 0..5 {
        clock.advance(Duration::from_secs(60));
        for s in &mut schedulers {
            fired += s.run_once().await.expect("pass").fired.len();
        }
    }
    assert_eq!(fired, 5);
    assert_eq!(payloads(b.as_ref(), &q).await.len(), 5);
}

#[tokio::test]
async fn run_stops_when_told() {
    let (b, _clock, q) = setup();
    let s = Schedule::every("s", q, HOUR, "x").expect("schedule");
    b.schedule_store()
        .expect("schedule_store")
        .put_schedule(&s)
        .await
        .expect("put");
    let stop = leaseq_core::CancellationToken::new();
    let task = tokio::spawn(Scheduler::new(b).run(stop.clone()));
    stop.cancel();
    let done = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("run returned after the cancel")
        .expect("joined");
    assert!(done.is_ok());
}
