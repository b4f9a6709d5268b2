//! A storm: producers and real [`Worker`]s (each on a backend handle of its
//! own, like separate processes) on one queue, a ledger of what happened,
//! and the checks a fault test runs between faults: progress resumes, the
//! indexes stay consistent (INV-1), and in the end nothing is lost or acked
//! twice. With an operator ([`Storm::operate`]) items are also cancelled
//! and the queue paused and resumed at random, and each item must end
//! exactly once: acked, Dead or Cancelled.

use leaseq_core::BackendExt as _;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leaseq_core::{
    handler_fn, Backend, BoxError, CancellationToken, Error, ItemId, ItemState, Job, JobContext,
    JobOutcome, LeaseToken, NewItem, Permanent, QueueName, RetryPolicy, Worker,
};
use tokio::task::JoinHandle;

use crate::ledger::{Figures, Ledger};
use crate::operator::{self, Operator, OperatorConfig};

/// The items one worker is running, with how many runs of each (a worker
/// may claim an item again while a run of its whose lease ran out is still
/// settling its outcome).
type InFlight = Arc<Mutex<BTreeMap<ItemId, u32>>>;

/// Ends one run of `id` in `flight`; false when none was going.
fn land(flight: &InFlight, id: ItemId) -> bool {
    let mut f = flight.lock().unwrap_or_else(|p| p.into_inner());
    match f.get_mut(&id) {
        Some(n) if *n > 1 => {
            *n -= 1;
            true
        }
        Some(_) => {
            f.remove(&id);
            true
        }
        None => false,
    }
}

/// How a storm runs.
#[derive(Debug, Clone)]
pub struct StormConfig {
    /// Handler slots per worker.
    pub concurrency: usize,
    /// Lease length.
    pub lease_ttl: Duration,
    /// Each worker's reaper interval.
    pub reap_interval: Duration,
    /// Items per enqueue.
    pub batch: usize,
    /// Pause between a producer's enqueues.
    pub produce_every: Duration,
    /// Producers wait while more items than this are enqueued but not yet
    /// acked, so a long run's backlog stays bounded.
    pub max_backlog: u64,
    /// Producers write each batch with `enqueue_once` under a request id of
    /// its own and send it again after every retryable error until it is
    /// answered (for up to [`SETTLE_FOR`]), so an enqueue whose outcome was
    /// unknown is accounted for; and every payload is tracked, so an id
    /// handed out twice or a batch written twice is found.
    pub settled: bool,
    /// How long each handler run takes.
    pub work: Duration,
    /// How long the run of one item in 64 takes instead (longer than the
    /// lease ttl: the heartbeats keep it).
    pub long_work: Duration,
    /// Items in every state for an operator: one item in 32 fails for
    /// good (goes Dead) and one in 8 is enqueued with a delay of 0.2 to
    /// 1 s (Scheduled).
    pub variety: bool,
}

/// The end of a payload whose handler fails for good
/// ([`StormConfig::variety`]).
const FATAL: &str = "-fatal";

/// How long a settled producer sends one batch again before it gives up
/// on it (and the verdict fails).
pub const SETTLE_FOR: Duration = Duration::from_secs(90);

/// Which payload each id was handed out for, and which payload each
/// delivered id carried (storms with [`StormConfig::settled`]).
#[derive(Debug, Default)]
struct Names {
    /// Ids from Ok replies, with the payload each was enqueued with.
    by_id: HashMap<ItemId, String>,
    /// The id each payload got.
    by_payload: HashMap<String, ItemId>,
    /// The payload each delivered id carried.
    delivered: HashMap<ItemId, String>,
    /// Batches never answered Ok: their first payload and the last error.
    unsettled: Vec<(String, String)>,
    /// Errors that are not retryable, met while settling a batch.
    refused: Vec<String>,
    problems: Vec<String>,
}

impl Names {
    fn enqueued(&mut self, id: ItemId, payload: &str) {
        match self.by_id.insert(id, payload.to_owned()) {
            Some(before) if before != payload => self.problems.push(format!(
                "id {id} handed out twice: for {before:?} and {payload:?}"
            )),
            _ => {}
        }
        match self.by_payload.insert(payload.to_owned(), id) {
            Some(before) if before != id => self.problems.push(format!(
                "payload {payload:?} written twice: ids {before} and {id}"
            )),
            _ => {}
        }
    }

    fn delivered(&mut self, id: ItemId, payload: String) {
        match self.delivered.get(&id) {
            Some(before) if *before != payload => self.problems.push(format!(
                "id {id} delivered with two payloads: {before:?} and {payload:?}"
            )),
            Some(_) => {}
            None => {
                self.delivered.insert(id, payload);
            }
        }
    }

    /// Every problem found, once the producers are done: first the ids
    /// that named two payloads (wrong on every setting), then the rest
    /// (batches written twice, delivered ids no Ok enqueue returned,
    /// batches never answered), which a store that takes writes back (an
    /// older snapshot, no persistence) also shows.
    fn verdict(&self) -> (Vec<String>, Vec<String>) {
        let mut twice: Vec<String> = self
            .problems
            .iter()
            .filter(|p| p.contains("handed out twice") || p.contains("two payloads"))
            .cloned()
            .collect();
        let mut other: Vec<String> = self
            .problems
            .iter()
            .filter(|p| !(p.contains("handed out twice") || p.contains("two payloads")))
            .cloned()
            .collect();
        for (id, payload) in &self.delivered {
            match self.by_id.get(id) {
                Some(p) if p != payload => twice.push(format!(
                    "id {id} was enqueued for {p:?} but delivered {payload:?}"
                )),
                Some(_) => {}
                None => other.push(format!(
                    "id {id} ({payload:?}) delivered but no enqueue returned it \
                     (written twice, or an id handed out again)"
                )),
            }
        }
        for (first, e) in &self.unsettled {
            other.push(format!("the batch of {first:?} was never answered Ok: {e}"));
        }
        (twice, other)
    }
}

impl Default for StormConfig {
    fn default() -> Self {
        StormConfig {
            concurrency: 4,
            lease_ttl: Duration::from_secs(2),
            reap_interval: Duration::from_millis(250),
            batch: 8,
            produce_every: Duration::from_millis(10),
            max_backlog: 2_000,
            settled: false,
            work: Duration::ZERO,
            long_work: Duration::ZERO,
            variety: false,
        }
    }
}

/// A running storm.
#[derive(Debug)]
pub struct Storm {
    queue: QueueName,
    /// What happened, as the tasks saw it.
    pub ledger: Arc<Ledger>,
    /// Calls that failed with a retryable error (producers) and backend
    /// errors the workers counted.
    pub errors: Arc<AtomicU64>,
    /// Items whose result a worker could not record for sure: the ack's
    /// reply was lost (`Unrecorded`), or a retry of it found the lease gone
    /// (`LeaseLost`), with every outcome seen for them.
    unrecorded: Arc<Mutex<BTreeMap<ItemId, Vec<String>>>>,
    /// Outcomes reported for items the reporting worker was not running.
    strays: Arc<Mutex<BTreeMap<ItemId, Vec<String>>>>,
    producing: CancellationToken,
    shutdown: CancellationToken,
    producers: Vec<JoinHandle<()>>,
    workers: Vec<JoinHandle<leaseq_core::Result<()>>>,
    metrics: Vec<leaseq_core::WorkerMetrics>,
    backends: Vec<Arc<dyn Backend>>,
    in_flight: Vec<InFlight>,
    cfg: StormConfig,
    crashes: u64,
    names: Arc<Mutex<Names>>,
    operator: Option<(CancellationToken, JoinHandle<Result<(), String>>)>,
}

/// A storm's end as [`Storm::settle`] found it.
#[derive(Debug, Clone)]
pub struct Ending {
    /// The ledger's counts.
    pub figures: Figures,
    /// The ledger's verdict: `Err` when an item was lost, acked twice or
    /// delivered after its ack.
    pub verdict: Result<String, String>,
    /// Ids that named two payloads (storms with
    /// [`StormConfig::settled`]; empty otherwise).
    pub ids_twice: Vec<String>,
    /// Also: batches written twice, batches never answered, payloads
    /// delivered under an id no Ok enqueue returned.
    pub id_problems: Vec<String>,
    /// Errors that cannot be retried, met by settled producers.
    pub refused: Vec<String>,
    /// Outcomes the workers reported for the items the verdict found open.
    pub open_outcomes: Vec<(ItemId, Vec<String>)>,
    /// Outcomes reported for items the reporting worker was not running.
    pub strays: Vec<(ItemId, Vec<String>)>,
    /// Outcomes the workers reported for a few unsure items (gone after
    /// an ack whose reply was lost).
    pub unsure: Vec<(ItemId, Vec<String>)>,
}

impl Ending {
    /// Panics, naming `verdict` (the storm's printed figures), when the
    /// ledger found an item lost, acked twice or delivered after its ack,
    /// an id problem, or a refusal a settled producer could not retry.
    ///
    /// # Panics
    /// On any of those.
    pub fn assert_nothing_lost(&self, verdict: &str) {
        if let Err(e) = &self.verdict {
            panic!(
                "{verdict}: {e}; outcomes seen for open items: {:?}; stray outcomes: {:?}",
                self.open_outcomes, self.strays
            );
        }
        assert!(
            self.id_problems.is_empty(),
            "{verdict}: {:?}",
            self.id_problems
        );
        self.assert_nothing_refused(verdict);
    }

    /// Panics, naming `verdict`, when a settled producer met an error it
    /// cannot retry.
    ///
    /// # Panics
    /// On such an error.
    pub fn assert_nothing_refused(&self, verdict: &str) {
        assert!(
            self.refused.is_empty(),
            "{verdict}: settled producers met errors that cannot be retried: {:?}",
            self.refused
        );
    }
}

struct Producer {
    b: Arc<dyn Backend>,
    q: QueueName,
    cfg: StormConfig,
    ledger: Arc<Ledger>,
    errors: Arc<AtomicU64>,
    names: Arc<Mutex<Names>>,
    stop: CancellationToken,
    /// Tells payloads of different producers apart.
    index: usize,
}

impl Producer {
    async fn pause(&self) {
        tokio::select! {
            _ = self.stop.cancelled() => {}
            _ = tokio::time::sleep(self.cfg.produce_every) => {}
        }
    }

    async fn run(self) {
        let mut n = 0u64;
        while !self.stop.is_cancelled() {
            if self.ledger.enqueued_count() as u64 > self.ledger.finished() + self.cfg.max_backlog {
                self.pause().await;
                continue;
            }
            let payloads: Vec<String> = (0..self.cfg.batch)
                .map(|i| {
                    // One item in 64 runs long (`long_work`).
                    let long = if i == 0 && n.is_multiple_of(8) {
                        "-long"
                    } else {
                        ""
                    };
                    // With variety, one item in 32 fails for good.
                    let fatal = if self.cfg.variety && i == 1 && n.is_multiple_of(4) {
                        FATAL
                    } else {
                        ""
                    };
                    format!("item-{}-{n}-{i}{long}{fatal}", self.index)
                })
                .collect();
            let item = |(i, p): (usize, String)| {
                let delayed = self.cfg.variety && i == 2;
                let item = NewItem::new(p);
                if delayed {
                    item.delay(Duration::from_millis(200 + 200 * (n % 5)))
                } else {
                    item
                }
            };
            let items: Vec<NewItem> = payloads.iter().cloned().enumerate().map(item).collect();
            n += 1;
            if self.cfg.settled {
                self.settle(payloads, items).await;
            } else {
                match self.b.enqueue(&self.q, items).await {
                    Ok(out) => self
                        .ledger
                        .enqueued(&out.iter().map(|e| e.id).collect::<Vec<_>>()),
                    // Unknown whether it was written: never retried, so no
                    // payload can exist twice. Such items are drained but
                    // not judged.
                    Err(_) => {
                        self.errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            self.pause().await;
        }
    }

    /// Sends one batch under one request id until it is answered Ok (also
    /// after the storm was told to stop: a batch is never left unknown).
    async fn settle(&self, payloads: Vec<String>, items: Vec<NewItem>) {
        let request = LeaseToken::random();
        let start = Instant::now();
        loop {
            let e = match self.b.enqueue_once(&self.q, request, items.clone()).await {
                Ok(out) => {
                    let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
                    if out.len() != payloads.len() {
                        names.problems.push(format!(
                            "a batch of {} answered with {} ids",
                            payloads.len(),
                            out.len()
                        ));
                    }
                    for (e, p) in out.iter().zip(&payloads) {
                        names.enqueued(e.id, p);
                    }
                    drop(names);
                    self.ledger
                        .enqueued(&out.iter().map(|e| e.id).collect::<Vec<_>>());
                    return;
                }
                Err(e) => e,
            };
            self.errors.fetch_add(1, Ordering::Relaxed);
            {
                let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
                if !e.is_retryable() {
                    names.refused.push(e.to_string());
                }
                if start.elapsed() > SETTLE_FOR {
                    let first = payloads.first().cloned().unwrap_or_default();
                    names.unsettled.push((first, e.to_string()));
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(if e.is_retryable() {
                20
            } else {
                200
            }))
            .await;
        }
    }
}

impl Storm {
    /// Starts one producer per entry of `producers` and one worker per entry
    /// of `workers` on `queue`.
    pub fn start(
        producers: Vec<Arc<dyn Backend>>,
        workers: Vec<Arc<dyn Backend>>,
        queue: QueueName,
        cfg: StormConfig,
    ) -> leaseq_core::Result<Storm> {
        let mut storm = Storm {
            queue,
            ledger: Arc::new(Ledger::default()),
            errors: Arc::new(AtomicU64::new(0)),
            unrecorded: Arc::default(),
            strays: Arc::default(),
            producing: CancellationToken::new(),
            shutdown: CancellationToken::new(),
            producers: Vec::new(),
            workers: Vec::new(),
            metrics: Vec::new(),
            backends: workers.clone(),
            in_flight: Vec::new(),
            cfg: cfg.clone(),
            crashes: 0,
            names: Arc::default(),
            operator: None,
        };
        for (index, b) in producers.into_iter().enumerate() {
            let p = Producer {
                b,
                q: storm.queue.clone(),
                cfg: cfg.clone(),
                ledger: storm.ledger.clone(),
                errors: storm.errors.clone(),
                names: storm.names.clone(),
                stop: storm.producing.clone(),
                index,
            };
            storm.producers.push(tokio::spawn(p.run()));
        }
        for b in workers {
            let (worker, flight) = storm.worker(b, &cfg)?;
            storm.in_flight.push(flight);
            storm.metrics.push(worker.metrics());
            let token = storm.shutdown.clone();
            storm.workers.push(tokio::spawn(worker.run(token)));
        }
        Ok(storm)
    }

    fn worker(
        &self,
        b: Arc<dyn Backend>,
        cfg: &StormConfig,
    ) -> leaseq_core::Result<(Worker, InFlight)> {
        let (ledger, events, unrecorded) = (
            self.ledger.clone(),
            self.ledger.clone(),
            self.unrecorded.clone(),
        );
        let names = self.cfg.settled.then(|| self.names.clone());
        let strays = self.strays.clone();
        let (work, long_work) = (cfg.work, cfg.long_work);
        // Items this worker is running: handler started, no outcome yet.
        let flight: InFlight = Arc::default();
        let (landed, running) = (flight.clone(), flight.clone());
        Worker::builder(b, self.queue.as_str())
            .concurrency(cfg.concurrency)
            .lease_ttl(cfg.lease_ttl)
            .reap_interval(Some(cfg.reap_interval))
            .idle_wait(Duration::from_millis(200))
            .retry(RetryPolicy::exponential(Duration::from_millis(20)))
            .shutdown_deadline(Duration::from_secs(2))
            .on_event(move |e| match &e.outcome {
                _ if !land(&landed, e.id) => {
                    // An event for an item this worker was not running.
                    events.stray(e.id);
                    strays
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .entry(e.id)
                        .or_default()
                        .push(format!("stray {:?}", e.outcome));
                }
                JobOutcome::Acked => events.acked(e.id),
                JobOutcome::Cancelled => events.cancelled(e.id),
                JobOutcome::Dead { .. } => events.dead(e.id),
                JobOutcome::Unrecorded { .. } | JobOutcome::LeaseLost => {
                    unrecorded
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .entry(e.id)
                        .or_default()
                        .push(format!("{:?}", e.outcome));
                }
                _ => {}
            })
            .build(handler_fn(move |job: Job, ctx: JobContext| {
                let ledger = ledger.clone();
                *running
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(job.id)
                    .or_default() += 1;
                if let Some(names) = &names {
                    names
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .delivered(job.id, String::from_utf8_lossy(&job.payload).into_owned());
                }
                let first = job.payload.ends_with(b"-long");
                let fatal = job.payload.ends_with(FATAL.as_bytes());
                let work = if first { long_work } else { work };
                async move {
                    ledger.delivered(job.id);
                    if fatal {
                        return Err(Permanent::boxed("fails for good by design"));
                    }
                    if !work.is_zero() {
                        // A cancelled job stops early, as a handler should.
                        tokio::select! {
                            _ = tokio::time::sleep(work) => {}
                            _ = ctx.cancelled() => {}
                        }
                    }
                    Ok::<(), BoxError>(())
                }
            }))
            .map(|w| (w, flight))
    }

    /// Kills worker `i` hard (its task is aborted mid-handler, as a process
    /// crash would end it: its leases are left to run out) and starts a
    /// fresh worker on the same backend handle in its place.
    pub async fn crash(&mut self, i: usize) -> leaseq_core::Result<()> {
        let i = i % self.workers.len().max(1);
        let b = self.backends[i].clone();
        let (worker, fresh_flight) = self.worker(b, &self.cfg.clone())?;
        self.metrics.push(worker.metrics());
        let fresh = tokio::spawn(worker.run(self.shutdown.clone()));
        let old = std::mem::replace(&mut self.workers[i], fresh);
        old.abort();
        // Only once the task is gone is its set of running items final.
        let _ = old.await;
        // What it was running may have been acked just before the crash,
        // with the reply never seen.
        let flight = std::mem::replace(&mut self.in_flight[i], fresh_flight);
        let mut u = self.unrecorded.lock().unwrap_or_else(|p| p.into_inner());
        for id in flight.lock().unwrap_or_else(|p| p.into_inner()).keys() {
            u.entry(*id)
                .or_default()
                .push("in flight in a crashed worker".into());
        }
        drop(u);
        self.crashes += 1;
        Ok(())
    }

    /// Starts an operator on its own handle `b` ([`crate::operator`]):
    /// it cancels items and pauses and resumes the queue at random until
    /// the storm settles, then resumes the queue.
    pub fn operate(&mut self, b: Arc<dyn Backend>, config: OperatorConfig) {
        let stop = CancellationToken::new();
        let op = Operator {
            backend: b,
            queue: self.queue.clone(),
            ledger: self.ledger.clone(),
            config,
            stop: stop.clone(),
        };
        self.operator = Some((stop, tokio::spawn(operator::run(op))));
    }

    /// Workers crashed so far.
    pub fn crashes(&self) -> u64 {
        self.crashes
    }

    /// Backend errors the workers met so far (from their metrics), plus the
    /// producers' failed enqueues.
    pub fn failures(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
            + self
                .metrics
                .iter()
                .map(|m| m.snapshot().backend_errors)
                .sum::<u64>()
    }

    /// Waits until `n` more acks than now have gone through; returns how
    /// long that took, or an error after `limit`.
    pub async fn progress(&self, n: u64, limit: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        let target = self.ledger.acks() + n;
        while self.ledger.acks() < target {
            if start.elapsed() > limit {
                return Err(format!(
                    "no progress: {} of {n} acks within {limit:?}",
                    n + self.ledger.acks() - target
                ));
            }
            if let Some(dead) = self.workers.iter().position(|w| w.is_finished()) {
                return Err(format!("worker {dead} stopped by itself"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(start.elapsed())
    }

    /// Stops producing, waits until every item is done and the queue is
    /// empty (as `judge` sees it through `b`), stops the workers and gives
    /// the verdict: `Err` when an item was lost, acked twice or delivered
    /// after its ack, or (settled storms) an id or batch was written twice.
    pub async fn finish(self, b: &dyn Backend, limit: Duration) -> Result<String, String> {
        let end = self.settle(b, limit).await?;
        let ids = if end.id_problems.is_empty() {
            Ok(())
        } else {
            Err(end.id_problems.join("; "))
        };
        match (end.verdict, ids) {
            (Ok(summary), Ok(())) => Ok(summary),
            (Ok(_), Err(ids)) => Err(ids),
            (Err(e), ids) => Err(format!(
                "{e}; outcomes seen for the open items: {:?}; stray outcomes: {:?}{}",
                end.open_outcomes,
                end.strays,
                ids.err().map(|i| format!("; {i}")).unwrap_or_default()
            )),
        }
    }

    /// Stops producing, waits until nothing is Ready, Scheduled or Leased
    /// (as seen through `b`), stops the workers, and accounts for the items
    /// still open: Dead in the store counts as Dead, gone after an ack
    /// whose reply was lost as unsure. `Err` only when the queue never
    /// drained within `limit`, or a producer or worker did not end well (a
    /// worker gets `limit` too to stop).
    pub async fn settle(mut self, b: &dyn Backend, limit: Duration) -> Result<Ending, String> {
        self.producing.cancel();
        for p in self.producers.drain(..) {
            match tokio::time::timeout(SETTLE_FOR + limit, p).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(format!("a producer died: {e}")),
                Err(_) => return Err("a producer never stopped".into()),
            }
        }
        if let Some((stop, op)) = self.operator.take() {
            stop.cancel();
            match tokio::time::timeout(limit, op).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => return Err(format!("the operator: {e}")),
                Ok(Err(e)) => return Err(format!("the operator died: {e}")),
                Err(_) => return Err("the operator never stopped".into()),
            }
        }
        let start = Instant::now();
        loop {
            let drained = matches!(b.stats(&self.queue).await,
                Ok(s) if s.ready + s.scheduled + s.leased == 0 && !s.paused);
            if drained {
                break;
            }
            if start.elapsed() > limit {
                let stats = b.stats(&self.queue).await;
                return Err(format!("the queue never drained: {stats:?}"));
            }
            if let Some(dead) = self.workers.iter().position(|w| w.is_finished()) {
                return Err(format!(
                    "worker {dead} stopped by itself before the queue drained"
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.shutdown.cancel();
        for w in self.workers.drain(..) {
            match tokio::time::timeout(limit, w).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => return Err(format!("a worker ended with {e}")),
                Ok(Err(e)) => return Err(format!("a worker died: {e}")),
                Err(_) => return Err(format!("a worker did not stop within {limit:?}")),
            }
        }
        let unrecorded = self
            .unrecorded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut unsure = Vec::new();
        for id in self.ledger.open() {
            let found = b.item(&self.queue, id).await;
            // Gone after a cancel asked for it: ended Cancelled by a reap.
            if matches!(found, Err(Error::NotFound { .. })) && self.ledger.gone(id) {
                continue;
            }
            match found {
                // Dead by a reap or a claim that met its last attempt.
                Ok(info) if info.state == ItemState::Dead => self.ledger.dead(id),
                // An ack whose reply was lost: the item is gone, so it was
                // done.
                Err(Error::NotFound { .. }) if unrecorded.contains_key(&id) => {
                    self.ledger.unsure(id);
                    if unsure.len() < 4 {
                        unsure.push((id, unrecorded.get(&id).cloned().unwrap_or_default()));
                    }
                }
                _ => {}
            }
        }
        let names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let (ids_twice, mut id_problems) = names.verdict();
        id_problems.splice(0..0, ids_twice.iter().cloned());
        let open_outcomes = self
            .ledger
            .open()
            .into_iter()
            .take(20)
            .map(|id| (id, unrecorded.get(&id).cloned().unwrap_or_default()))
            .collect();
        let strays = self
            .strays
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .take(20)
            .map(|(id, o)| (*id, o.clone()))
            .collect();
        Ok(Ending {
            unsure,
            strays,
            figures: self.ledger.figures(),
            verdict: self.ledger.verdict(),
            ids_twice,
            id_problems,
            refused: names.refused.clone(),
            open_outcomes,
        })
    }

    /// The queue the storm runs on.
    pub fn queue(&self) -> &QueueName {
        &self.queue
    }
}

/// Fails unless the queue's raw indexes are consistent (INV-1), retrying
/// the snapshot while the backend is unreachable, for up to `limit`.
pub async fn indexes_consistent(
    b: &dyn Backend,
    q: &QueueName,
    limit: Duration,
) -> Result<(), String> {
    let Some(hooks) = b.test_hooks() else {
        return Ok(());
    };
    let start = Instant::now();
    loop {
        match hooks.snapshot(q).await {
            Ok(snap) => {
                let v = snap.violations();
                return if v.is_empty() {
                    Ok(())
                } else {
                    Err(format!("INV-1: {}", v.join("; ")))
                };
            }
            Err(e) if start.elapsed() > limit => return Err(format!("snapshot: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}
