//! Runs operation sequences against a backend and the model side by side,
//! and draws (and shrinks) sequences with proptest.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::groupwise::Groupwise as _;
use leaseq_core::limits::MAX_REASON_LEN;
use leaseq_core::BackendExt as _;
use leaseq_core::{
    ClaimSpec, ItemId, ItemState, LeaseKey, LeaseToken, LeaseTtl, NewItem, QueueName,
};
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestError, TestRunner};

use super::hooks::{expired_leases, untouched};
use super::ops::{ops, ItemSpec, Op, Timing, Verb};
use super::state::{undecidable, Model};
use super::window::Window;
use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Outcome, Rule, TestBackend, TimeControl, Violation};

/// The ids a step reads back from peek(Dead) after a redrive.
const PEEK_ALL: usize = 10_000;
/// The longest the driver waits for a server clock to move past a hook.
const CLOCK_DEADLINE: Duration = Duration::from_secs(10);

/// `LEASEQ_MODEL_CASES`, when set to a number (at least 1).
fn env_cases() -> Option<u32> {
    std::env::var("LEASEQ_MODEL_CASES")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .map(|n| n.max(1))
}

/// How many cases to draw and how long they are.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// Sequences to run.
    pub cases: u32,
    /// The longest sequence drawn.
    pub max_steps: usize,
    /// Every item is read back (`item`) after every `sweep_every`-th step and
    /// at the end of a case; `stats`, `queues` and the index snapshot after
    /// every step.
    pub sweep_every: usize,
    /// A file (relative to the test's working directory, i.e. the crate
    /// root) where proptest keeps the seeds of failing cases and replays them
    /// first on every run. Commit it.
    pub regressions: Option<&'static str>,
    /// Sequences to run instead of `cases` when the factory's backend is on
    /// a manual clock, where a case costs no waiting.
    pub manual_cases: Option<u32>,
}

/// The suite's sequences on a real clock, where each waits on the backend.
pub const SUITE_CASES: u32 = 32;

/// The suite's sequences on a manual clock: a case takes well under a
/// millisecond there, and 32 cases missed an `ack` that kept its dedup key
/// held in 6 runs of 6 on a seeded backend, where 256 caught it in 6 of 6.
pub const SUITE_MANUAL_CASES: u32 = 256;

impl ModelConfig {
    /// `cases` sequences of up to 40 steps, read back every step.
    pub fn new(cases: u32) -> Self {
        ModelConfig {
            cases,
            max_steps: 40,
            sweep_every: 1,
            regressions: None,
            manual_cases: None,
        }
    }

    /// The suite's own count: [`SUITE_CASES`], or [`SUITE_MANUAL_CASES`] on a
    /// manual clock; `LEASEQ_MODEL_CASES` overrides both.
    pub fn suite_default() -> Self {
        match env_cases() {
            Some(cases) => Self::new(cases),
            None => Self {
                manual_cases: Some(SUITE_MANUAL_CASES),
                ..Self::new(SUITE_CASES)
            },
        }
    }

    /// The case count from `LEASEQ_MODEL_CASES` when set, else `default`.
    pub fn from_env(default: u32) -> Self {
        Self::new(env_cases().unwrap_or(default))
    }

    /// Sets the longest sequence.
    #[must_use]
    pub fn max_steps(mut self, n: usize) -> Self {
        self.max_steps = n.max(1);
        self
    }

    /// Sets how often every item is read back.
    #[must_use]
    pub fn sweep_every(mut self, n: usize) -> Self {
        self.sweep_every = n.max(1);
        self
    }

    /// Sets the regressions file.
    #[must_use]
    pub fn regressions(mut self, path: &'static str) -> Self {
        self.regressions = Some(path);
        self
    }
}

/// One sequence in progress.
struct Run {
    tb: TestBackend,
    q: QueueName,
    model: Model,
    leases: Vec<LeaseKey>,
    /// The spec of every claim made, for `recover_claim`.
    specs: Vec<ClaimSpec>,
    timing: Timing,
    /// The backend's now as last read: a lower bound for the next step.
    last: u64,
}

impl Run {
    /// The backend's now, read (real clock) or known (manual clock).
    async fn read_now(&mut self) -> Result<u64, Violation> {
        let t = self
            .tb
            .backend
            .now()
            .await
            .or_fail(Rule::Contract("now"), "now")?
            .as_millis();
        ensure!(
            t >= self.last,
            Rule::Contract("now"),
            "the backend's clock went back from {}ms to {t}ms",
            self.last
        );
        self.last = t;
        Ok(t)
    }

    /// The window of an operation that ran since the last reading.
    async fn window(&mut self) -> Result<Window, Violation> {
        let before = self.last;
        let after = self.read_now().await?;
        let w = match self.timing {
            Timing::Manual => Window::between(before, after),
            Timing::Real => Window::between(before.saturating_sub(1), after + 1),
        };
        self.model.at = w;
        Ok(w)
    }

    /// After a hook that ran within `hook`: makes sure the clock is past it.
    async fn pass(&mut self, hook: Window) -> Result<(), Violation> {
        match &self.tb.time {
            TimeControl::Manual(clock) => {
                clock.advance(Duration::from_millis(2));
                self.read_now().await?;
            }
            TimeControl::Real => {
                let started = tokio::time::Instant::now();
                while self.read_now().await?.saturating_sub(1) <= hook.hi {
                    ensure!(
                        started.elapsed() < CLOCK_DEADLINE,
                        Rule::Contract("now"),
                        "the backend's clock did not pass {hook} within {CLOCK_DEADLINE:?}"
                    );
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }
        Ok(())
    }

    fn pick(&self, pick: u16) -> Option<LeaseKey> {
        if self.leases.is_empty() {
            return None;
        }
        Some(self.leases[pick as usize % self.leases.len()].clone())
    }

    fn new_item(&self, spec: &ItemSpec) -> NewItem {
        let mut item = NewItem::new(spec.payload.clone())
            .priority(spec.priority)
            .max_attempts(spec.max_attempts)
            .delay(Duration::from_millis(self.timing.delay_ms(spec.delay)));
        if let Some(k) = spec.dedup {
            item = item.dedup_key(format!("k{k}"));
        }
        item
    }

    async fn fenced(&mut self, key: LeaseKey, verb: Verb) -> Result<(), Violation> {
        let b = self.tb.backend.clone();
        match verb {
            Verb::Ack => {
                let got = b.ack(&key).await;
                self.window().await?;
                self.model.ack(&key, &got)
            }
            Verb::Extend(s) => {
                let ms = self.timing.ttl_ms(s);
                let ttl = LeaseTtl::new(Duration::from_millis(ms)).or_fail(self.rule(), "ttl")?;
                let got = b.extend(&key, ttl).await;
                let now = self.window().await?;
                self.model.extend(&key, ms, now, &got)
            }
            Verb::Release(delay) => {
                let ms = self.timing.delay_ms(delay);
                let got = b.release(&key, Duration::from_millis(ms)).await;
                let now = self.window().await?;
                self.model.release(&key, ms, now, &got)
            }
            Verb::GiveBack => {
                let got = b.give_back(&key).await;
                self.window().await?;
                self.model.give_back(&key, &got)
            }
            Verb::Complete => {
                let got = b
                    .complete(&key, leaseq_core::Bytes::from_static(b"result"))
                    .await;
                self.window().await?;
                self.model.ack(&key, &got)
            }
            Verb::Snooze(delay) => {
                let ms = self.timing.delay_ms(delay);
                let got = b.snooze(&key, Duration::from_millis(ms)).await;
                let now = self.window().await?;
                self.model.snooze(&key, ms, now, &got)
            }
            Verb::Fail(long) => {
                let reason = if long {
                    "é".repeat(MAX_REASON_LEN / 2 + 7)
                } else {
                    format!("failed {}", key.id)
                };
                let got = b.fail(&key, &reason).await;
                self.window().await?;
                self.model.fail(&key, &reason, &got)
            }
        }
    }

    /// An id picked (modulo) from every id the queue handed out, live or
    /// gone; `None` before the first.
    fn known_id(&self, pick: u16) -> Option<ItemId> {
        let known: Vec<ItemId> = self
            .model
            .items()
            .keys()
            .chain(self.model.gone())
            .copied()
            .collect();
        known.get(pick as usize % known.len().max(1)).copied()
    }

    fn rule(&self) -> Rule {
        Rule::Contract("model driver")
    }

    async fn step(&mut self, op: &Op) -> Result<(), Violation> {
        let b = self.tb.backend.clone();
        let q = self.q.clone();
        // Operator actions are an optional group: a backend without it
        // runs the rest of the sequence.
        let admin_op = matches!(
            op,
            Op::Redrive(_) | Op::RedriveItem(_) | Op::RemoveItem(_) | Op::Purge
        );
        if admin_op && self.tb.backend.groups().admin.is_none() {
            return Ok(());
        }
        // So is control.
        let control_op = matches!(
            op,
            Op::Cancel(_)
                | Op::Pause(_)
                | Op::RunNow(_)
                | Op::Fenced {
                    verb: Verb::Snooze(_),
                    ..
                }
                | Op::Forged {
                    verb: Verb::Snooze(_),
                    ..
                }
        );
        if control_op && self.tb.backend.groups().control.is_none() {
            return Ok(());
        }
        // And history.
        let history_op = matches!(
            op,
            Op::Finished
                | Op::Fenced {
                    verb: Verb::Complete,
                    ..
                }
                | Op::Forged {
                    verb: Verb::Complete,
                    ..
                }
        );
        if history_op && self.tb.backend.groups().history.is_none() {
            return Ok(());
        }
        match op {
            Op::Enqueue(specs) => {
                let items: Vec<NewItem> = specs.iter().map(|s| self.new_item(s)).collect();
                let got = b.enqueue(&q, items.clone()).await;
                let now = self.window().await?;
                self.model.enqueue(&items, now, &got)
            }
            Op::Claim { max, ttl } => {
                let ms = self.timing.ttl_ms(*ttl);
                let spec = ClaimSpec::new(*max, Duration::from_millis(ms))
                    .or_fail(self.rule(), "claim spec")?;
                self.specs.push(spec.duplicate());
                let got = b.claim(&q, spec).await;
                let now = self.window().await?;
                self.model.claim(*max, ms, now, &got)?;
                if let Ok(c) = got {
                    self.leases.extend(c.leases.into_iter().map(|l| l.key));
                }
                Ok(())
            }
            Op::Fenced { pick, verb } => match self.pick(*pick) {
                Some(key) => self.fenced(key, *verb).await,
                None => Ok(()),
            },
            Op::Forged { pick, verb } => match self.pick(*pick) {
                Some(key) => {
                    let forged = LeaseKey {
                        token: LeaseToken::random(),
                        ..key
                    };
                    self.fenced(forged, *verb).await
                }
                None => Ok(()),
            },
            Op::Fate { pick, forge, ahead } => {
                let Some(mut key) = self.pick(*pick) else {
                    return Ok(());
                };
                if *forge {
                    key.token = LeaseToken::random();
                }
                // An hour on: no call takes that long. The last reading:
                // the call's now is at or after it.
                let held_until = if *ahead {
                    self.last + 3_600_000
                } else {
                    self.last
                };
                let got = b
                    .lease_fate(&key, leaseq_core::Timestamp::from_millis(held_until))
                    .await;
                let now = self.window().await?;
                self.model.lease_fate(&key, *ahead, now, &got)
            }
            Op::Recover(pick) => {
                if self.specs.is_empty() {
                    return Ok(());
                }
                let spec = self.specs[*pick as usize % self.specs.len()].duplicate();
                let got = b.recover_claim(&q, &spec).await;
                let now = self.window().await?;
                self.model.recover_claim(&spec, now, &got)
            }
            Op::AckMany(picks) => {
                let keys: Vec<LeaseKey> = picks
                    .iter()
                    .filter_map(|&(pick, forge)| {
                        let key = self.pick(pick)?;
                        Some(if forge {
                            LeaseKey {
                                token: LeaseToken::random(),
                                ..key
                            }
                        } else {
                            key
                        })
                    })
                    .collect();
                if keys.is_empty() {
                    return Ok(());
                }
                let got = b.ack_many(&keys).await;
                self.window().await?;
                self.model.ack_many(&keys, got)
            }
            Op::Reap => {
                let got = b.reap(&q).await;
                let now = self.window().await?;
                self.model.reap(now, &got)
            }
            Op::Advance(s) => {
                match &self.tb.time {
                    TimeControl::Manual(clock) => {
                        clock.advance(Duration::from_millis(Timing::advance_ms(*s)));
                        self.read_now().await?;
                    }
                    TimeControl::Real => {}
                }
                Ok(())
            }
            Op::ExpireLeases | Op::MakeDue => {
                let Some(hooks) = b.test_hooks() else {
                    return Ok(());
                };
                let expire = *op == Op::ExpireLeases;
                let expired_before = if expire {
                    expired_leases(b.as_ref(), &q).await?
                } else {
                    Vec::new()
                };
                let got = if expire {
                    hooks.expire_leases(&q).await
                } else {
                    hooks.make_due(&q).await
                };
                let n = got.or_fail(Rule::Contract("TestHooks"), "a test hook")?;
                let hook = self.window().await?;
                if expire {
                    untouched(b.as_ref(), &q, &expired_before).await?;
                    self.model.expire_leases(hook, n)?;
                } else {
                    self.model.make_due(hook, n)?;
                }
                self.pass(hook).await
            }
            Op::Stats => Ok(()),
            Op::Peek(state, limit) => {
                let got = b.peek(&q, *state, *limit as usize).await;
                let now = self.window().await?;
                self.model.peek(*state, *limit as usize, now, &got)
            }
            Op::Redrive(limit) => {
                let got = b.redrive(&q, *limit as usize).await;
                let dead = b
                    .peek(&q, ItemState::Dead, PEEK_ALL)
                    .await
                    .or_fail(Rule::Contract("peek"), "peek(dead) after a redrive")?;
                self.window().await?;
                let ids: Vec<ItemId> = dead.iter().map(|i| i.id).collect();
                self.model.redrive(*limit as usize, &got, &ids)
            }
            Op::RedriveItem(pick) => {
                let Some(id) = self.known_id(*pick) else {
                    return Ok(());
                };
                let got = b.redrive_item(&q, id).await;
                self.window().await?;
                self.model.redrive_item(id, &got)
            }
            Op::RemoveItem(pick) => {
                let Some(id) = self.known_id(*pick) else {
                    return Ok(());
                };
                let got = b.remove_item(&q, id).await;
                let now = self.window().await?;
                self.model.remove_item(id, now, &got)
            }
            Op::Purge => {
                let got = b.purge(&q).await;
                self.window().await?;
                self.model.purge(&got)
            }
            Op::Finished => {
                let got = b.finished(&q, None, leaseq_core::limits::MAX_PEEK).await;
                self.window().await?;
                self.model.finished(&got)
            }
            Op::Cancel(pick) => {
                let Some(id) = self.known_id(*pick) else {
                    return Ok(());
                };
                let got = b.cancel(&q, id).await;
                let now = self.window().await?;
                self.model.cancel(id, now, &got)
            }
            Op::Pause(pause) => {
                let got = if *pause {
                    b.pause(&q).await
                } else {
                    b.resume(&q).await
                };
                self.window().await?;
                self.model.pause(*pause, &got)
            }
            Op::RunNow(pick) => {
                let Some(id) = self.known_id(*pick) else {
                    return Ok(());
                };
                let got = b.run_now(&q, id).await;
                let now = self.window().await?;
                self.model.run_now(id, now, &got)
            }
        }
    }

    /// Compares counts and raw indexes, and with `items` every item too.
    async fn sweep(&mut self, items: bool) -> Result<(), Violation> {
        let b = self.tb.backend.clone();
        let stats = b.stats(&self.q).await;
        let now = self.window().await?;
        self.model.stats(now, &stats)?;
        let listing = b.queues().await;
        self.model.listing(&self.q, &listing)?;
        if let Some(hooks) = b.test_hooks() {
            let snap = hooks
                .snapshot(&self.q)
                .await
                .or_fail(Rule::Inv1, "snapshot hook")?;
            let v = snap.violations();
            ensure!(
                v.is_empty(),
                Rule::Inv1,
                "the indexes are inconsistent: {}",
                v.join("; ")
            );
            let held: BTreeSet<ItemId> = snap.items.iter().copied().collect();
            let want: BTreeSet<ItemId> = self.model.items().keys().copied().collect();
            ensure!(
                held == want,
                Rule::Inv5,
                "the backend holds items {held:?}; the model holds {want:?}"
            );
        }
        if items {
            let ids: Vec<ItemId> = self
                .model
                .items()
                .keys()
                .chain(self.model.gone().iter().rev().take(3))
                .copied()
                .collect();
            for id in ids {
                let got = b.item(&self.q, id).await;
                let now = self.window().await?;
                self.model.item(id, now, &got)?;
            }
        }
        Ok(())
    }
}

/// Runs one operation sequence on a fresh queue of a backend from
/// `factory`, comparing every answer with the model, and purges the queue.
/// A violation names the step and the operation.
pub async fn run_ops(factory: &dyn BackendFactory, ops: &[Op], sweep_every: usize) -> CheckResult {
    let tb = match factory.backend().await {
        Ok(tb) => tb,
        Err(u) => return Ok(Outcome::Unavailable(u.0)),
    };
    let timing = match tb.time {
        TimeControl::Manual(_) => Timing::Manual,
        TimeControl::Real => Timing::Real,
    };
    let name = format!("model-{}", LeaseToken::random());
    let q = QueueName::new(&name[..30]).or_fail(Rule::Contract("QueueName"), "naming")?;
    let mut model = if tb.backend.capabilities().order == leaseq_core::Order::Global {
        Model::new()
    } else {
        Model::per_shard()
    };
    model.lease_traces = tb.backend.capabilities().lease_traces;
    let mut run = Run {
        tb,
        q,
        model,
        leases: Vec::new(),
        specs: Vec::new(),
        timing,
        last: 0,
    };
    let result = async {
        run.read_now().await?;
        run.keep_every_ending().await?;
        for (i, op) in ops.iter().enumerate() {
            let full = (i + 1) % sweep_every.max(1) == 0 || i + 1 == ops.len();
            run.step(op).await.map_err(|v| at_step(v, i, op))?;
            run.sweep(full).await.map_err(|v| at_step(v, i, op))?;
        }
        Ok::<(), Violation>(())
    }
    .await;
    let purged = match run.tb.backend.groups().admin {
        Some(admin) => admin.purge(&run.q).await.map(drop),
        None => Ok(()),
    };
    // The run's policy goes with it, so the store keeps nothing of the run.
    let reset = match run.tb.backend.groups().history {
        Some(history) => history.set_retention(&run.q, Default::default()).await,
        None => Ok(()),
    };
    result?;
    purged.or_fail(Rule::Contract("purge"), "purging the model's queue")?;
    reset.or_fail(Rule::Contract("History"), "resetting the model's retention")?;
    Ok(Outcome::Passed)
}

impl Run {
    /// On a backend with History: keep every ending for the run, so the
    /// model knows what `finished` must list.
    async fn keep_every_ending(&mut self) -> Result<(), Violation> {
        let Some(history) = self.tb.backend.groups().history else {
            return Ok(());
        };
        let all = leaseq_core::Retention::default()
            .completed(leaseq_core::Keep::FOREVER)
            .cancelled(leaseq_core::Keep::FOREVER);
        history
            .set_retention(&self.q, all)
            .await
            .or_fail(Rule::Contract("History"), "set_retention")?;
        self.model.kept = Some(Default::default());
        Ok(())
    }
}

fn at_step(v: Violation, i: usize, op: &Op) -> Violation {
    Violation::new(v.rule, format!("step {i} ({op:?}): {}", v.message))
}

/// Draws `config.cases` sequences with proptest and runs each with
/// [`run_ops`] on its own queue; a failure is shrunk to a minimal sequence,
/// which the violation quotes (paste it into a regression test) and whose
/// seed goes to the regressions file. Runs on a runtime of its own: call it
/// from a plain `#[test]`.
///
/// Prints `model on <backend>: N cases, M steps (K skipped)` to stderr.
/// Returns [`Outcome::Unavailable`] when the factory has no backend.
///
/// # Panics
/// When no tokio runtime can be built.
pub fn check_model(factory: &dyn BackendFactory, config: &ModelConfig) -> CheckResult {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("cannot build a tokio runtime for the model: {e}"),
    };
    let cases = match rt.block_on(factory.backend()) {
        Err(u) => return Ok(Outcome::Unavailable(u.0)),
        Ok(tb) if tb.is_manual() => config.manual_cases.unwrap_or(config.cases),
        Ok(_) => config.cases,
    };
    let mut pc = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    if let Some(path) = config.regressions {
        pc.failure_persistence = Some(Box::new(FileFailurePersistence::Direct(path)));
    }
    let steps = AtomicU64::new(0);
    let cases = AtomicU64::new(0);
    let mut runner = TestRunner::new(pc);
    let sweep = config.sweep_every;
    let outcome = runner.run(&ops(config.max_steps), |seq| {
        cases.fetch_add(1, Ordering::Relaxed);
        steps.fetch_add(seq.len() as u64, Ordering::Relaxed);
        match rt.block_on(run_ops(factory, &seq, sweep)) {
            Ok(Outcome::Passed) | Ok(Outcome::Skipped(_)) => Ok(()),
            Ok(Outcome::Unavailable(u)) => Err(TestCaseError::fail(format!("unavailable: {u}"))),
            Err(v) => Err(TestCaseError::fail(v.message)),
        }
    });
    eprintln!(
        "model on {}: {} cases, {} steps",
        factory.name(),
        cases.load(Ordering::Relaxed),
        steps.load(Ordering::Relaxed)
    );
    match outcome {
        Ok(()) => Ok(Outcome::Passed),
        Err(TestError::Abort(why)) => Err(undecidable(format!("proptest aborted: {why}"))),
        Err(TestError::Fail(why, minimal)) => {
            let again = rt.block_on(run_ops(factory, &minimal, 1));
            let rule = match &again {
                Err(v) => v.rule,
                _ => Rule::Contract("model (flaky: the minimal case passed on a rerun)"),
            };
            Err(Violation::new(
                rule,
                format!(
                    "{why}\nminimal failing sequence ({} steps):\n{minimal:#?}",
                    minimal.len()
                ),
            ))
        }
    }
}
