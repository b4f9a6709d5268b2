//! What every system shares: the settings, the payloads, the enqueue phase,
//! the drain clock and the probe's tally.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};

/// The workload and where the servers are.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Jobs per drain run.
    pub jobs: u64,
    /// Jobs per enqueue batch.
    pub batch: usize,
    /// Producer tasks in the enqueue phase.
    pub producers: usize,
    /// Consumer tasks (or workers) in the drain phase.
    pub consumers: usize,
    /// Jobs in the duplicate-requeue probe.
    pub probe_jobs: u64,
    /// Consumers that claim and crash in the probe.
    pub probe_crashers: usize,
    /// Concurrent recoveries in the probe.
    pub probe_recoveries: usize,
    /// The Redis server.
    pub redis_url: String,
    /// The PostgreSQL server.
    pub pg_url: String,
    /// apalis: poll interval of each worker.
    pub apalis_poll: Duration,
    /// apalis: jobs fetched per poll.
    pub apalis_buffer: usize,
    /// Longest a drain may take before the run counts as failed.
    pub timeout: Duration,
    /// Whether each PostgreSQL run vacuums its tables first; without, the
    /// runs meet the dead rows of the runs before them, as on a server
    /// whose autovacuum is off or behind.
    pub vacuum: bool,
}

/// One run's rates.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    /// Jobs per second in the enqueue phase.
    pub enqueue: f64,
    /// Jobs per second in the drain phase (start to the last ack).
    pub drain: f64,
}

/// The 16-byte payload of job `id`: its decimal digits, zero-padded, so a
/// consumer can tell which job it got.
pub fn payload(id: u64) -> [u8; 16] {
    let mut out = [b'0'; 16];
    let digits = id.to_string();
    let bytes = digits.as_bytes();
    let n = bytes.len().min(16);
    out[16 - n..].copy_from_slice(&bytes[bytes.len() - n..]);
    out
}

/// The payload as a string (for the systems that carry JSON).
pub fn payload_string(id: u64) -> String {
    String::from_utf8_lossy(&payload(id)).into_owned()
}

/// The job id a payload carries, if it is one of ours.
pub fn parse_id(bytes: &[u8]) -> Option<u64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// Enqueues `jobs` ids (0..jobs) in batches of `batch` from `producers`
/// tasks; `send` writes one batch. Returns the seconds the phase took.
pub async fn enqueue_batches<F, Fut>(
    jobs: u64,
    batch: usize,
    producers: usize,
    send: F,
) -> Result<f64>
where
    F: Fn(Vec<u64>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<()>> + Send + 'static,
{
    if batch == 0 || producers == 0 {
        bail!("need a batch of at least one and at least one producer");
    }
    let batches = jobs.div_ceil(batch as u64);
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..producers {
        let (next, send) = (next.clone(), send.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= batches {
                    return Ok::<_, anyhow::Error>(());
                }
                let first = i * batch as u64;
                let last = (first + batch as u64).min(jobs);
                send((first..last).collect()).await?;
            }
        }));
    }
    for t in tasks {
        t.await.context("producer task")??;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Counts acks towards a target and keeps the instant the last one landed.
#[derive(Debug)]
pub struct DrainClock {
    target: u64,
    acked: AtomicU64,
    started: Instant,
    ended: Mutex<Option<Instant>>,
    reached: tokio::sync::Notify,
}

impl DrainClock {
    /// Starts the clock now.
    pub fn start(target: u64) -> Arc<Self> {
        Arc::new(DrainClock {
            target,
            acked: AtomicU64::new(0),
            started: Instant::now(),
            ended: Mutex::new(None),
            reached: tokio::sync::Notify::new(),
        })
    }

    /// Counts `n` acks; the one that reaches the target stops the clock.
    pub fn add(&self, n: u64) {
        let before = self.acked.fetch_add(n, Ordering::AcqRel);
        if before < self.target && before + n >= self.target {
            self.stop();
        }
    }

    /// Stops the clock now (for systems whose last ack is seen by polling).
    pub fn stop(&self) {
        if let Ok(mut ended) = self.ended.lock() {
            ended.get_or_insert_with(Instant::now);
        }
        self.reached.notify_one();
    }

    /// Acks counted so far.
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::Acquire)
    }

    /// True once the target is reached.
    pub fn done(&self) -> bool {
        self.acked() >= self.target
    }

    /// Waits for the clock to stop; returns jobs per second.
    pub async fn wait(&self, timeout: Duration) -> Result<f64> {
        tokio::time::timeout(timeout, self.reached.notified())
            .await
            .map_err(|_| {
                anyhow!(
                    "drain did not finish within {timeout:?}: {} of {} acked",
                    self.acked(),
                    self.target
                )
            })?;
        let ended = self
            .ended
            .lock()
            .map_err(|_| anyhow!("drain clock poisoned"))?
            .ok_or_else(|| anyhow!("drain clock woke without an end"))?;
        let secs = ended.duration_since(self.started).as_secs_f64();
        Ok(self.target as f64 / secs.max(1e-9))
    }
}

/// Waits for the drain: the clock's stop, or the first consumer that
/// failed. Consumers still running after the clock stopped get two seconds
/// to notice, then are aborted.
pub async fn finish_drain(
    clock: &DrainClock,
    mut consumers: tokio::task::JoinSet<Result<()>>,
    timeout: Duration,
) -> Result<f64> {
    let rate = {
        let wait = clock.wait(timeout);
        tokio::pin!(wait);
        loop {
            tokio::select! {
                rate = &mut wait => break rate?,
                joined = consumers.join_next() => match joined {
                    Some(Ok(Ok(()))) => {}
                    Some(Ok(Err(e))) => return Err(e.context("consumer failed")),
                    Some(Err(e)) => bail!("consumer task: {e}"),
                    None => {
                        // Every consumer returned: the clock must have stopped.
                        break (&mut wait).await?;
                    }
                },
            }
        }
    };
    let rest = async {
        while let Some(joined) = consumers.join_next().await {
            joined.context("consumer task")??;
        }
        Ok::<_, anyhow::Error>(())
    };
    match tokio::time::timeout(Duration::from_secs(2), rest).await {
        Ok(r) => r?,
        Err(_) => consumers.abort_all(),
    }
    Ok(rate)
}

/// Deliveries per job id in the probe's final drain.
#[derive(Debug)]
pub struct Tally {
    counts: Vec<AtomicU32>,
    strays: AtomicU64,
    total: AtomicU64,
}

impl Tally {
    /// For ids 0..jobs.
    pub fn new(jobs: u64) -> Arc<Self> {
        Arc::new(Tally {
            counts: (0..jobs).map(|_| AtomicU32::new(0)).collect(),
            strays: AtomicU64::new(0),
            total: AtomicU64::new(0),
        })
    }

    /// Counts one delivery of the job whose payload is `payload`.
    pub fn record(&self, payload: &[u8]) {
        self.total.fetch_add(1, Ordering::Relaxed);
        match parse_id(payload).and_then(|id| self.counts.get(usize::try_from(id).ok()?)) {
            Some(c) => {
                c.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                self.strays.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Deliveries counted so far.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Waits until no delivery arrived for `quiet` (and at least `want`
    /// arrived, or `limit` passed).
    pub async fn settle(&self, want: u64, quiet: Duration, limit: Duration) {
        let started = Instant::now();
        let mut last = self.total();
        let mut last_change = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = self.total();
            if now != last {
                last = now;
                last_change = Instant::now();
            }
            let quiet_enough = last_change.elapsed() >= quiet;
            if (quiet_enough && now >= want) || started.elapsed() >= limit {
                return;
            }
        }
    }

    /// The verdict, given how many jobs the crashed consumers held.
    pub fn verdict(&self, crashed: u64, recovered: Option<u64>) -> ProbeReport {
        let mut lost = 0;
        let mut duplicated = 0;
        let mut extra = 0;
        for c in &self.counts {
            match c.load(Ordering::Relaxed) {
                0 => lost += 1,
                1 => {}
                n => {
                    duplicated += 1;
                    extra += u64::from(n - 1);
                }
            }
        }
        ProbeReport {
            crashed,
            recovered,
            lost,
            duplicated,
            extra,
            strays: self.strays.load(Ordering::Relaxed),
        }
    }
}

/// What the duplicate-requeue probe found.
#[derive(Debug, Clone)]
pub struct ProbeReport {
    /// Jobs the crashed consumers held.
    pub crashed: u64,
    /// Jobs the recoveries said they requeued, when they say.
    pub recovered: Option<u64>,
    /// Jobs never delivered after the recoveries.
    pub lost: u64,
    /// Jobs delivered more than once after the recoveries.
    pub duplicated: u64,
    /// Deliveries beyond the first, over all duplicated jobs.
    pub extra: u64,
    /// Deliveries whose payload was not one of the probe's.
    pub strays: u64,
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} crashed", self.crashed)?;
        if let Some(r) = self.recovered {
            write!(f, ", {r} requeued")?;
        }
        write!(f, "; lost {}, duplicated {}", self.lost, self.duplicated)?;
        if self.extra > self.duplicated {
            write!(f, " ({} extra deliveries)", self.extra)?;
        }
        if self.strays > 0 {
            write!(f, ", {} unknown payloads", self.strays)?;
        }
        Ok(())
    }
}

/// The median of some figures (the middle one, or the mean of the two
/// middle ones).
pub fn median(mut xs: Vec<f64>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(|a, b| a.total_cmp(b));
    let mid = xs.len() / 2;
    Some(if xs.len() % 2 == 1 {
        xs[mid]
    } else {
        (xs[mid - 1] + xs[mid]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_16_bytes_and_carry_the_id() {
        for id in [0, 7, 19_999, u64::MAX] {
            let p = payload(id);
            assert_eq!(p.len(), 16);
            if id < 10u64.pow(16) {
                assert_eq!(parse_id(&p), Some(id));
            }
        }
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0]), Some(2.5));
    }

    #[test]
    fn tally_counts_lost_and_duplicated() {
        let t = Tally::new(3);
        t.record(&payload(0));
        t.record(&payload(0));
        t.record(&payload(2));
        t.record(b"nonsense");
        let v = t.verdict(3, Some(3));
        assert_eq!((v.lost, v.duplicated, v.extra, v.strays), (1, 1, 1, 1));
    }
}
