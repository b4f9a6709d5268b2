//! The context every check runs in: a backend, a fresh queue of its own, the
//! rule it proves, and helpers that turn surprises into violations.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use leaseq_core::testing::TestHooks;
use leaseq_core::BackendExt as _;
use leaseq_core::{
    Backend, ClaimSpec, Error, ItemId, ItemInfo, ItemState, Lease, NewItem, Order, QueueName,
    QueueStats, ReapReport, Timestamp,
};
use tokio::task::JoinHandle;

use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Outcome, Rule, TestBackend, TimeControl, Violation};

/// A lease that must stay live for the whole check.
pub(crate) const LONG: Duration = Duration::from_secs(600);
/// A lease the check lets run out (waited on, never guessed).
pub(crate) const SHORT: Duration = Duration::from_millis(250);
/// The longest a check waits for a backend clock to pass a point.
const CLOCK_DEADLINE: Duration = Duration::from_secs(30);

/// How long one check may take before it fails as stalled: a backend call
/// that never returns is a violation the check reports, not a hung test.
/// Generous, since a loaded machine runs many checks at once; it grows with
/// `LEASEQ_CONFORMANCE_SCALE`.
fn check_deadline() -> Duration {
    Duration::from_secs(120) * crate::harness::scale()
}

/// What a check needs beyond the core operations.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Needs {
    pub(crate) hooks: bool,
    pub(crate) dedup: bool,
    pub(crate) priorities: bool,
    pub(crate) delays: bool,
    /// One claim order over the whole queue ([`Order::Global`]).
    pub(crate) global_order: bool,
    /// Test hooks that count steps ([`TestHooks::steps`]).
    pub(crate) steps: bool,
    /// A backend on a real clock ([`TimeControl::Real`]).
    pub(crate) real_time: bool,
    /// Global queue limits (the [`leaseq_core::Throttles`] group, with
    /// [`leaseq_core::LimitScope::Global`]).
    pub(crate) limits: bool,
    /// Periodic schedules (the [`leaseq_core::ScheduleStore`] group).
    pub(crate) schedules: bool,
    /// Unique-for keys ([`leaseq_core::Capabilities::unique_for`]).
    pub(crate) unique_for: bool,
    /// Operator actions (the [`leaseq_core::Admin`] group).
    pub(crate) admin: bool,
    /// Control of running work (the [`leaseq_core::Control`] group).
    pub(crate) control: bool,
    /// Live workers (the [`leaseq_core::WorkerRegistry`] group).
    pub(crate) registry: bool,
    /// Finished items (the [`leaseq_core::History`] group).
    pub(crate) history: bool,
    /// Live job events (the [`leaseq_core::Events`] group).
    pub(crate) events: bool,
}

impl Needs {
    pub(crate) const NONE: Needs = Needs {
        hooks: false,
        dedup: false,
        priorities: false,
        delays: false,
        global_order: false,
        steps: false,
        real_time: false,
        limits: false,
        schedules: false,
        unique_for: false,
        admin: false,
        control: false,
        registry: false,
        history: false,
        events: false,
    };
    pub(crate) const HOOKS: Needs = Needs {
        hooks: true,
        ..Needs::NONE
    };
    pub(crate) const DEDUP: Needs = Needs {
        dedup: true,
        ..Needs::NONE
    };
    pub(crate) const PRIORITIES: Needs = Needs {
        priorities: true,
        ..Needs::NONE
    };
    pub(crate) const DELAYS: Needs = Needs {
        delays: true,
        ..Needs::NONE
    };
    pub(crate) const STEPS: Needs = Needs {
        hooks: true,
        steps: true,
        ..Needs::NONE
    };
    pub(crate) const REAL_TIME: Needs = Needs {
        real_time: true,
        ..Needs::NONE
    };
    pub(crate) const GLOBAL_ORDER: Needs = Needs {
        global_order: true,
        ..Needs::NONE
    };
    pub(crate) const SCHEDULES: Needs = Needs {
        schedules: true,
        ..Needs::NONE
    };
    pub(crate) const ADMIN: Needs = Needs {
        admin: true,
        ..Needs::NONE
    };
    pub(crate) const CONTROL: Needs = Needs {
        control: true,
        ..Needs::NONE
    };
    pub(crate) const REGISTRY: Needs = Needs {
        registry: true,
        ..Needs::NONE
    };
    pub(crate) const HISTORY: Needs = Needs {
        history: true,
        ..Needs::NONE
    };
    pub(crate) const EVENTS: Needs = Needs {
        events: true,
        ..Needs::NONE
    };
    pub(crate) const DELETE_QUEUE: Needs = Needs::ADMIN;
    pub(crate) const REMOVE_ITEM: Needs = Needs::ADMIN;
    pub(crate) const UNIQUE_FOR: Needs = Needs {
        dedup: true,
        unique_for: true,
        ..Needs::NONE
    };

    /// These needs and `other`'s.
    pub(crate) const fn and(self, other: Needs) -> Needs {
        Needs {
            hooks: self.hooks || other.hooks,
            dedup: self.dedup || other.dedup,
            priorities: self.priorities || other.priorities,
            delays: self.delays || other.delays,
            global_order: self.global_order || other.global_order,
            steps: self.steps || other.steps,
            real_time: self.real_time || other.real_time,
            limits: self.limits || other.limits,
            schedules: self.schedules || other.schedules,
            unique_for: self.unique_for || other.unique_for,
            admin: self.admin || other.admin,
            control: self.control || other.control,
            registry: self.registry || other.registry,
            history: self.history || other.history,
            events: self.events || other.events,
        }
    }

    fn missing(self, b: &dyn Backend) -> Option<String> {
        let caps = b.capabilities();
        let groups = b.groups();
        if self.hooks && groups.test_hooks.is_none() {
            return Some(group_missing("test_hooks"));
        }
        if self.admin && groups.admin.is_none() {
            return Some(group_missing("admin"));
        }
        if self.limits && groups.throttles.is_none() {
            return Some(group_missing("throttles"));
        }
        if self.schedules && groups.schedules.is_none() {
            return Some(group_missing("schedules"));
        }
        if self.control && groups.control.is_none() {
            return Some(group_missing("control"));
        }
        if self.registry && groups.registry.is_none() {
            return Some(group_missing("registry"));
        }
        if self.history && groups.history.is_none() {
            return Some(group_missing("history"));
        }
        if self.events && groups.events.is_none() {
            return Some(group_missing("events"));
        }
        let counts = QueueName::new("_")
            .ok()
            .and_then(|q| b.test_hooks().and_then(|h| h.steps(&q)));
        if self.steps && counts.is_none() {
            return Some(
                "the backend's test hooks do not count steps (TestHooks::steps is None)".into(),
            );
        }
        if self.dedup && !caps.dedup {
            return Some("the backend does not support dedup keys".into());
        }
        if self.priorities && !caps.priorities {
            return Some("the backend does not support priorities".into());
        }
        if self.delays && !caps.delays {
            return Some("the backend does not support delays".into());
        }
        if let Some(throttles) = groups.throttles.filter(|_| self.limits) {
            if throttles.scope() != leaseq_core::LimitScope::Global {
                return Some(format!(
                    "the backend does not enforce global queue limits exactly as set (Throttles::scope is {:?})",
                    throttles.scope()
                ));
            }
        }
        if self.unique_for && !caps.unique_for {
            return Some(
                "the backend does not hold keys after the ack (Capabilities::unique_for is false)"
                    .into(),
            );
        }

        if self.global_order && caps.order != Order::Global {
            return Some(format!(
                "the backend keeps claim order per shard, not over the whole queue (Capabilities::order is {:?})",
                caps.order
            ));
        }
        None
    }
}

/// Why a check that needs optional group `name` is skipped.
pub(crate) fn group_missing(name: &str) -> String {
    let what = match name {
        "admin" => "operator actions (redrive, remove, purge, delete queue)",
        "throttles" => "queue limits",
        "schedules" => "periodic schedules",
        "control" => "control of running work (cancel, pause, snooze, run now, progress)",
        "registry" => "live workers",
        "history" => "finished items (retention, results, waiting for an ending)",
        "events" => "live job events",
        _ => "test hooks",
    };
    format!(
        "the backend does not offer the {name} group ({what}): Backend::groups().{name} is None"
    )
}

/// One check's world.
#[derive(Debug, Clone)]
pub(crate) struct Cx {
    pub(crate) tb: TestBackend,
    pub(crate) b: Arc<dyn Backend>,
    pub(crate) q: QueueName,
    pub(crate) rule: Rule,
    /// Set once the check plants corruption: until then a repair reported
    /// by a claim or a reap is a failure (a transition left a stray entry).
    planted: Arc<std::sync::atomic::AtomicBool>,
    /// Set when the check found, once running, that the backend cannot do
    /// what it needs (a test hook answered `None`): the reason.
    skipped: Arc<std::sync::Mutex<Option<String>>>,
    /// The check's other queues ([`Cx::own`], [`Cx::fresh`]), deleted with
    /// `q` when the check ends.
    owned: Arc<std::sync::Mutex<Vec<QueueName>>>,
}

/// Runs `body` on a fresh backend and queue, then deletes the queue (purges
/// it on a backend that cannot delete one), also when the body found a
/// violation: a shared store keeps nothing of the check.
pub(crate) async fn run<Fut>(
    factory: &dyn BackendFactory,
    check: &str,
    rule: Rule,
    needs: Needs,
    body: impl FnOnce(Cx) -> Fut,
) -> CheckResult
where
    Fut: Future<Output = Result<(), Violation>>,
{
    let tb = match factory.backend().await {
        Ok(tb) => tb,
        Err(u) => return Ok(Outcome::Unavailable(u.0)),
    };
    if let Some(reason) = needs.missing(tb.backend.as_ref()) {
        return Ok(Outcome::Skipped(reason));
    }
    if needs.real_time && tb.is_manual() {
        return Ok(Outcome::Skipped(
            "the backend runs on a manual clock the suite moves".into(),
        ));
    }
    let name = format!("conf-{}-{:016x}", check, Rng::seeded().next());
    let q = QueueName::new(&name).or_fail(Rule::Contract("QueueName"), "naming the queue")?;
    let cx = Cx {
        b: tb.backend.clone(),
        tb,
        q,
        rule,
        planted: Arc::default(),
        skipped: Arc::default(),
        owned: Arc::default(),
    };
    let deadline = check_deadline();
    let result = match tokio::time::timeout(deadline, body(cx.clone())).await {
        Ok(result) => result,
        Err(_) => Err(cx.fail(format!(
            "the check did not finish within {deadline:?}: a call stalled or never returned \
             (for example a claim that keeps meeting an entry it neither leases nor removes)"
        ))),
    };
    // A backend without operator actions cannot be cleaned; the suite's
    // factories give such a backend a fresh store per check.
    let cleaned = match cx.b.groups().admin {
        Some(admin) => {
            let mut queues = vec![cx.q.clone()];
            queues.extend(
                cx.owned
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .drain(..),
            );
            let mut cleaned = Ok(());
            for q in &queues {
                let deleted = admin.delete_queue(q).await.map(drop);
                cleaned = cleaned.and(deleted);
            }
            cleaned
        }
        None => Ok(()),
    };
    result?;
    cleaned.or_fail(
        Rule::Contract("delete_queue"),
        "cleaning up the check's queue",
    )?;
    let skipped = cx
        .skipped
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    Ok(skipped.map_or(Outcome::Passed, Outcome::Skipped))
}

impl Cx {
    /// Marks that this check plants corrupt entries: repairs are expected
    /// from here on.
    pub(crate) fn mark_planted(&self) {
        self.planted
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Reports the check as skipped, for `reason`, once its body returns
    /// (which it should do at once).
    pub(crate) fn skip(&self, reason: impl Into<String>) {
        *self
            .skipped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reason.into());
    }

    /// Fails (as INV-1) on repairs no check planted: a repair where nothing
    /// was corrupted means a transition left a stray entry that a later
    /// call cleaned up, which a clean snapshot would otherwise hide.
    pub(crate) fn no_unplanted_repairs(
        &self,
        repairs: &[leaseq_core::Repair],
        by: &str,
    ) -> Result<(), Violation> {
        let planted = self.planted.load(std::sync::atomic::Ordering::SeqCst);
        if planted || repairs.is_empty() {
            return Ok(());
        }
        let shown: Vec<String> = repairs
            .iter()
            .take(3)
            .map(|r| format!("{} entry {} ({})", r.index, r.id, r.problem))
            .collect();
        let more = match repairs.len() {
            n if n > 3 => format!(" and {} more", n - 3),
            _ => String::new(),
        };
        Err(Violation::new(
            Rule::Inv1,
            format!(
                "a repair where no corruption was planted: {by} repaired {}{more}, though this check planted none. An earlier transition of this check (a reap, claim, release, ack, ...) left a stray or dangling index entry; a later call cleaning it up does not make that transition right",
                shown.join(", ")
            ),
        ))
    }

    /// Another queue of this check's own, `<q>-<suffix>`: a name no other
    /// check uses, so checks sharing a store never touch each other's.
    /// Deleted with the check's queue when the check ends.
    pub(crate) fn own(&self, suffix: &str) -> Result<QueueName, Violation> {
        let q =
            QueueName::new(format!("{}-{suffix}", self.q)).or_fail(self.rule, "naming a queue")?;
        let mut owned = self
            .owned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !owned.contains(&q) {
            owned.push(q.clone());
        }
        Ok(q)
    }

    /// The same context on a fresh queue of its own ([`Cx::own`]): how a
    /// check starts over without `purge`, so it runs on a backend without
    /// the Admin group too.
    pub(crate) fn fresh(&self, suffix: &str) -> Result<Cx, Violation> {
        Ok(Cx {
            q: self.own(suffix)?,
            ..self.clone()
        })
    }

    /// The context for round `round` of a repeated check: this one for
    /// round 0, a fresh queue ([`Cx::fresh`]) for each later round, so every
    /// round starts empty on any backend (no purge needed).
    pub(crate) fn round(&self, round: u32) -> Result<Cx, Violation> {
        match round {
            0 => Ok(self.clone()),
            n => self.fresh(&format!("round-{n}")),
        }
    }

    /// The backend's test hooks, if any.
    pub(crate) fn hooks(&self) -> Option<&dyn TestHooks> {
        self.b.groups().test_hooks
    }

    /// Purges `queue`, one of this check's own, when the backend offers
    /// operator actions; a backend without them comes fresh to each check,
    /// so there is nothing to clean.
    pub(crate) async fn clean(&self, queue: &QueueName) -> leaseq_core::Result<u64> {
        match self.b.groups().admin {
            Some(admin) => admin.purge(queue).await,
            None => Ok(0),
        }
    }

    /// The same context proving another rule.
    pub(crate) fn with_rule(&self, rule: Rule) -> Cx {
        Cx {
            rule,
            ..self.clone()
        }
    }

    /// A violation of this check's rule.
    pub(crate) fn fail(&self, message: impl Into<String>) -> Violation {
        Violation::new(self.rule, message)
    }

    /// Enqueues `items`, returning their ids.
    pub(crate) async fn enqueue(&self, items: Vec<NewItem>) -> Result<Vec<ItemId>, Violation> {
        let n = items.len();
        let out = self
            .b
            .enqueue(&self.q, items)
            .await
            .or_fail(self.rule, "enqueue")?;
        ensure!(
            out.len() == n,
            self.rule,
            "enqueue of {n} items returned {} results",
            out.len()
        );
        Ok(out.into_iter().map(|e| e.id).collect())
    }

    /// Enqueues `n` default items with payloads `item-0`, `item-1`, … in
    /// batches; returns their ids in enqueue order.
    pub(crate) async fn push_n(&self, n: usize) -> Result<Vec<ItemId>, Violation> {
        let mut ids = Vec::with_capacity(n);
        let mut i = 0;
        while i < n {
            let end = (i + 500).min(n);
            let batch = (i..end)
                .map(|k| NewItem::new(format!("item-{k}")))
                .collect();
            ids.extend(self.enqueue(batch).await?);
            i = end;
        }
        Ok(ids)
    }

    /// Claims up to `max` items leased for `ttl`.
    pub(crate) async fn claim(&self, max: u32, ttl: Duration) -> Result<Vec<Lease>, Violation> {
        let spec = ClaimSpec::new(max, ttl).or_fail(self.rule, "building a claim")?;
        let claimed = self
            .b
            .claim(&self.q, spec)
            .await
            .or_fail(self.rule, "claim")?;
        self.no_unplanted_repairs(&claimed.repairs, "a claim")?;
        ensure!(
            claimed.leases.len() <= max as usize,
            self.rule,
            "a claim of at most {max} returned {} leases",
            claimed.leases.len()
        );
        Ok(claimed.leases)
    }

    /// Claims exactly one item, failing when there is none.
    pub(crate) async fn claim_one(&self, ttl: Duration) -> Result<Lease, Violation> {
        self.claim(1, ttl)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| self.fail("a claim returned nothing while an item was claimable"))
    }

    /// Claims in batches until a claim returns nothing, at most `bound`
    /// leases in all.
    pub(crate) async fn drain(&self, ttl: Duration, bound: usize) -> Result<Vec<Lease>, Violation> {
        let mut out = Vec::new();
        loop {
            let got = self.claim(1_000, ttl).await?;
            if got.is_empty() {
                return Ok(out);
            }
            out.extend(got);
            ensure!(
                out.len() <= bound,
                self.rule,
                "claims handed out {} leases but at most {bound} items were claimable",
                out.len()
            );
        }
    }

    /// The backend's now.
    pub(crate) async fn now(&self) -> Result<Timestamp, Violation> {
        self.b.now().await.or_fail(self.rule, "now")
    }

    /// Waits (or advances the manual clock) until the backend's now is past
    /// `t`.
    pub(crate) async fn wait_past(&self, t: Timestamp) -> Result<(), Violation> {
        let started = tokio::time::Instant::now();
        loop {
            let now = self.now().await?;
            if now > t {
                return Ok(());
            }
            let gap = t.saturating_since(now) + Duration::from_millis(1);
            match &self.tb.time {
                TimeControl::Manual(clock) => clock.advance(gap),
                TimeControl::Real => tokio::time::sleep(gap.min(Duration::from_millis(50))).await,
            }
            ensure!(
                started.elapsed() < CLOCK_DEADLINE,
                self.rule,
                "the backend's clock did not pass {t} within {CLOCK_DEADLINE:?} (now {now})"
            );
        }
    }

    /// Makes every lease of the queue expired (not reaped): by the clock,
    /// or by the `expire_leases` hook on a real clock when it exists.
    pub(crate) async fn expire(&self, leases: &[Lease]) -> Result<(), Violation> {
        let latest = leases.iter().map(|l| l.expires_at).max();
        match (&self.tb.time, self.hooks(), latest) {
            (_, _, None) => Ok(()),
            (TimeControl::Real, Some(hooks), Some(_)) => {
                hooks
                    .expire_leases(&self.q)
                    .await
                    .or_fail(self.rule, "expire_leases hook")?;
                Ok(())
            }
            (_, _, Some(t)) => self.wait_past(t).await,
        }
    }

    /// Counts per state.
    pub(crate) async fn stats(&self) -> Result<QueueStats, Violation> {
        self.b.stats(&self.q).await.or_fail(self.rule, "stats")
    }

    /// Fails unless the counts are `[ready, scheduled, leased, dead]`.
    pub(crate) async fn expect_stats(&self, want: [u64; 4], when: &str) -> Result<(), Violation> {
        let s = self.stats().await?;
        let got = [s.ready, s.scheduled, s.leased, s.dead];
        ensure!(
            got == want,
            self.rule,
            "{when}: stats [ready, scheduled, leased, dead] are {got:?}, expected {want:?}"
        );
        Ok(())
    }

    /// The item, or `None` when the backend says `NotFound`.
    pub(crate) async fn item(&self, id: ItemId) -> Result<Option<ItemInfo>, Violation> {
        match self.b.item(&self.q, id).await {
            Ok(info) => Ok(Some(info)),
            Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.fail(format!("item({id}) failed unexpectedly: {e}"))),
        }
    }

    /// The item, failing when it is gone.
    pub(crate) async fn must_item(&self, id: ItemId) -> Result<ItemInfo, Violation> {
        self.item(id)
            .await?
            .ok_or_else(|| self.fail(format!("item {id} is gone (NotFound) but should exist")))
    }

    /// The due time of delayed item `id`: its due time while Scheduled, or
    /// (on a slow machine its delay may run out before the read) the
    /// backend's now once it shows Ready, a time at or after it. Fails
    /// when a Scheduled item shows no due time.
    pub(crate) async fn due_of(&self, id: ItemId) -> Result<Timestamp, Violation> {
        let info = self.must_item(id).await?;
        match (info.state, info.due_at) {
            (_, Some(due)) => Ok(due),
            (ItemState::Ready, None) => self.now().await,
            (_, None) => Err(self.fail(format!("Scheduled item {id} shows no due time"))),
        }
    }

    /// The steps the backend has spent on this check's queue.
    pub(crate) fn steps(&self) -> Result<u64, Violation> {
        self.hooks()
            .and_then(|h| h.steps(&self.q))
            .ok_or_else(|| self.fail("TestHooks::steps stopped counting mid-check"))
    }

    /// One reap.
    pub(crate) async fn reap(&self) -> Result<ReapReport, Violation> {
        let r = self.b.reap(&self.q).await.or_fail(self.rule, "reap")?;
        self.no_unplanted_repairs(&r.repairs, "a reap")?;
        Ok(r)
    }

    /// Reaps until a reap recovers nothing; the reports summed. Checks
    /// expire at most a few thousand leases, so a reap that still recovers
    /// after 100 calls is recovering the same leases again: that fails at
    /// once, with the indexes' state attached.
    pub(crate) async fn reap_all(&self) -> Result<ReapReport, Violation> {
        let mut total = ReapReport::default();
        for _ in 0..100 {
            let r = self.reap().await?;
            if r.recovered() == 0 && r.repairs.is_empty() {
                return Ok(total);
            }
            total.requeued += r.requeued;
            total.dead += r.dead;
            total.cancelled += r.cancelled;
            total.repairs.extend(r.repairs);
        }
        let snapshot = match self.hooks() {
            Some(h) => match h.snapshot(&self.q).await {
                Ok(s) => format!("index violations: {:?}", s.violations()),
                Err(e) => format!("snapshot failed: {e}"),
            },
            None => "no test hooks for a snapshot".into(),
        };
        Err(Violation::new(
            Rule::Inv4,
            format!(
                "reap recovered leases on each of 100 calls ({} in all): a recovered lease stays in the Leased index, so every reap recovers it again; {snapshot}",
                total.recovered()
            ),
        ))
    }

    /// With hooks: fails (as INV-1) unless the indexes are consistent.
    /// Returns whether a snapshot was taken.
    pub(crate) async fn check_indexes(&self, when: &str) -> Result<bool, Violation> {
        let Some(hooks) = self.hooks() else {
            return Ok(false);
        };
        let snap = hooks
            .snapshot(&self.q)
            .await
            .or_fail(Rule::Inv1, "snapshot hook")?;
        let v = snap.violations();
        ensure!(
            v.is_empty(),
            Rule::Inv1,
            "{when}: the indexes are inconsistent: {}",
            v.join("; ")
        );
        Ok(true)
    }

    /// Runs `call(cx, i)` for `i` in `0..k` as `k` tasks released together
    /// by one barrier (so they race); returns their results in order.
    pub(crate) async fn at_once<T, F, Fut>(&self, k: usize, call: F) -> Result<Vec<T>, Violation>
    where
        T: Send + 'static,
        F: Fn(Cx, usize) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
    {
        let gate = Arc::new(tokio::sync::Barrier::new(k));
        let tasks = (0..k)
            .map(|i| {
                let (gate, run) = (gate.clone(), call(self.clone(), i));
                self.spawn(async move {
                    gate.wait().await;
                    run.await
                })
            })
            .collect();
        self.join(tasks).await
    }

    /// Pushes `n` items, claims them all with short leases and lets the
    /// leases expire; then, released together by one barrier, runs `call`
    /// once per `per_call` leases and `reapers` reapers that reap until
    /// nothing is left. Returns each call's leases with its result, and
    /// what the reapers recovered in all.
    pub(crate) async fn race_expired_with_reapers<T, F, Fut>(
        &self,
        round: u32,
        n: usize,
        per_call: usize,
        reapers: usize,
        call: F,
    ) -> Result<(Vec<(Vec<Lease>, T)>, u64), Violation>
    where
        T: Send + 'static,
        F: Fn(Cx, Vec<Lease>) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
    {
        self.push_n(n).await?;
        let leases = self.claim(n as u32, SHORT).await?;
        ensure!(
            leases.len() == n,
            self.rule,
            "round {round}: claim of {n} returned {}",
            leases.len()
        );
        self.expire(&leases).await?;
        let chunks: Vec<Vec<Lease>> = leases
            .chunks(per_call.max(1))
            .map(<[Lease]>::to_vec)
            .collect();
        let gate = Arc::new(tokio::sync::Barrier::new(chunks.len() + reapers));
        let mut calls = Vec::new();
        for chunk in chunks {
            let (gate, run) = (gate.clone(), call(self.clone(), chunk.clone()));
            calls.push(self.spawn(async move {
                gate.wait().await;
                (chunk, run.await)
            }));
        }
        let mut reaping = Vec::new();
        for _ in 0..reapers {
            let (cx, gate) = (self.clone(), gate.clone());
            reaping.push(self.spawn(async move {
                gate.wait().await;
                cx.reap_all().await
            }));
        }
        let results = self.join(calls).await?;
        let mut recovered = 0;
        for r in self.join(reaping).await? {
            recovered += r?.recovered();
        }
        Ok((results, recovered))
    }

    /// Spawns a task on the runtime.
    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> JoinHandle<T> {
        tokio::spawn(fut)
    }

    /// Awaits every task; a panicked task is a violation ([`Rule::Panic`]:
    /// the backend panicked in one of the check's calls).
    pub(crate) async fn join<T>(&self, tasks: Vec<JoinHandle<T>>) -> Result<Vec<T>, Violation> {
        let mut out = Vec::with_capacity(tasks.len());
        for t in tasks {
            out.push(t.await.map_err(|e| self.died(e, "a task of the check"))?);
        }
        Ok(out)
    }

    /// The violation for a task of the check that did not finish: a panic
    /// (of the backend, in a call the task made) is [`Rule::Panic`] with the
    /// panic's message; a cancelled task fails the check's rule.
    pub(crate) fn died(&self, e: tokio::task::JoinError, task: &str) -> Violation {
        if !e.is_panic() {
            return self.fail(format!("{task} was cancelled: {e}"));
        }
        let payload = e.into_panic();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(a panic payload that is not a string)".into());
        Violation::new(
            Rule::Panic,
            format!(
                "a call in {task} panicked: {message} (a backend answers every call, with an \
                 error if need be; it never panics)"
            ),
        )
    }
}

/// Fails unless `res` is `LeaseLost` (as INV-3).
pub(crate) fn expect_lost<T: std::fmt::Debug>(
    res: Result<T, Error>,
    what: &str,
) -> Result<(), Violation> {
    match res {
        Err(Error::LeaseLost { .. }) => Ok(()),
        Ok(v) => Err(Violation::new(
            Rule::Inv3,
            format!("{what} succeeded ({v:?}) with a stale token; expected LeaseLost"),
        )),
        Err(e) => Err(Violation::new(
            Rule::Inv3,
            format!("{what} returned `{e}`; expected LeaseLost"),
        )),
    }
}

/// [`expect_lost`], and the error names the lease's own item `id` (the id
/// the caller holds, not one a layer or a store keeps underneath).
pub(crate) fn expect_lost_of<T: std::fmt::Debug>(
    res: Result<T, Error>,
    id: ItemId,
    what: &str,
) -> Result<(), Violation> {
    match res {
        Err(Error::LeaseLost { id: named }) if named != id => Err(Violation::new(
            Rule::Inv3,
            format!("{what} answered LeaseLost naming item {named}; the lease names {id}"),
        )),
        other => expect_lost(other, what),
    }
}

/// A pseudo-random source for the checks, seeded from the OS.
#[derive(Debug, Clone)]
pub(crate) struct Rng(rand::rngs::StdRng);

impl Rng {
    /// Seeded at random.
    pub(crate) fn seeded() -> Self {
        use rand::SeedableRng;
        Rng(rand::rngs::StdRng::from_os_rng())
    }

    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        rand::RngCore::next_u64(&mut self.0)
    }

    /// A number in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        rand::Rng::random_range(&mut self.0, 0..n.max(1))
    }
}
