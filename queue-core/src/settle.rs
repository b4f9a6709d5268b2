//! Calls whose reply may be lost, settled: each helper sends an operation
//! and, when its outcome is unknown ([`Error::OutcomeUnknown`]: it may have been
//! applied), finds out what happened through the call's own identity
//! instead of sending a new call. The worker uses it for every claim, ack,
//! release and fail; producers use [`Settle::enqueue`].
//!
//! | operation | identity | after an unknown outcome |
//! |---|---|---|
//! | claim | the [`ClaimSpec`]'s token family | [`Backend::recover_claim`]: the leases it made, or the same claim again ([`ClaimSpec::duplicate`]) |
//! | ack, ack_many, release, fail | the lease's token | [`Backend::lease_fate`]: held (send again), finished by this lease (it landed), or lost |
//! | enqueue | a request id | [`Backend::enqueue_once`] again with the same id |
//! | extend | the lease's token | send again (extending twice is harmless) |
//!
//! A first send that answers [`Error::LeaseLost`] is asked about too: a
//! lease that had not expired and that no call of its own ended was lost
//! by the store, and is reported [`Error::LeaseVanished`].
//!
//! An [`Error::Unavailable`] (refused before it ran) is simply sent again.
//! Each helper gives up after [`Settle::attempts`] tries (probes, which
//! only read, after three times as many) and returns the last error; on a
//! backend without `recover_claim` / `lease_fate` ([`Error::Unsupported`])
//! it returns the original error, as before.
//!
//! ```
//! use leaseq_core::settle::Settle;
//! let settle = Settle::new().attempts(4);
//! assert_eq!(settle.max_tries(), 4);
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::{
    Backend, ClaimSpec, Claimed, Enqueued, Error, ItemState, LeaseFate, LeaseKey, LeaseToken,
    NewItem, QueueName, Released, Result, Timestamp,
};

/// Called with each error that a helper answers by trying again.
pub type RetryObserver = Arc<dyn Fn(&Error) + Send + Sync>;

/// How hard to try: attempts and the pause between them (doubling).
#[derive(Clone)]
pub struct Settle {
    attempts: u32,
    first_pause: Duration,
    max_pause: Duration,
    observer: Option<RetryObserver>,
}

impl fmt::Debug for Settle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settle")
            .field("attempts", &self.attempts)
            .field("first_pause", &self.first_pause)
            .field("max_pause", &self.max_pause)
            .finish()
    }
}

impl Default for Settle {
    fn default() -> Self {
        Settle::new()
    }
}

/// One lease to finish, with the latest expiry its holder knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The lease.
    pub key: LeaseKey,
    /// Its expiry as of the claim or the last extend (backend clock).
    pub until: Timestamp,
}

impl Settle {
    /// 6 attempts, pauses from 20 ms doubling to at most 1 s.
    pub fn new() -> Self {
        Settle {
            attempts: 6,
            first_pause: Duration::from_millis(20),
            max_pause: Duration::from_secs(1),
            observer: None,
        }
    }

    /// Tries at most `n` times (at least once).
    #[must_use]
    pub fn attempts(mut self, n: u32) -> Self {
        self.attempts = n.max(1);
        self
    }

    /// The first pause between tries, and the cap the doubling stops at.
    #[must_use]
    pub fn pauses(mut self, first: Duration, max: Duration) -> Self {
        self.first_pause = first;
        self.max_pause = max.max(first);
        self
    }

    /// Calls `observer` with every error a helper answers by trying again.
    #[must_use]
    pub fn on_retry(mut self, observer: RetryObserver) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The most tries.
    pub fn max_tries(&self) -> u32 {
        self.attempts
    }

    /// Tells the observer about a retryable error.
    fn saw(&self, e: &Error) {
        if let Some(o) = &self.observer {
            o(e);
        }
    }

    /// Waits before the next try; nothing after the last one.
    async fn pause(&self, try_no: u32, _e: &Error) {
        self.pause_within(try_no, self.attempts).await;
    }

    /// The pause after try `try_no` of `budget` (none after the last).
    async fn pause_within(&self, try_no: u32, budget: u32) {
        if try_no + 1 >= budget {
            return;
        }
        let d = crate::backoff::grown(self.first_pause, 2.0, try_no, self.max_pause);
        tokio::time::sleep(d).await;
    }

    /// [`Backend::claim`], settled: a claim whose reply was lost returns
    /// the leases it made ([`Backend::recover_claim`]), never leases more.
    /// It keeps `spec` for that and sends [`ClaimSpec::duplicate`]s of it:
    /// every try is the same claim, never a new one.
    pub async fn claim(
        &self,
        b: &dyn Backend,
        queue: &QueueName,
        spec: ClaimSpec,
    ) -> Result<Claimed> {
        let mut last = None;
        for try_no in 0..self.attempts {
            let e = match b.claim(queue, spec.duplicate()).await {
                Ok(c) => return Ok(c),
                Err(e) if !e.is_retryable() => return Err(e),
                Err(e) => {
                    self.saw(&e);
                    e
                }
            };
            if e.may_have_applied() {
                match self.recover(b, queue, &spec).await {
                    Ok(c) if !c.leases.is_empty() => return Ok(c),
                    Ok(_) => {} // it leased nothing: claim again, same tokens
                    Err(Error::Unsupported { .. }) => return Err(e),
                    Err(e2) if !e2.is_retryable() => return Err(e2),
                    Err(_) => return Err(e),
                }
            }
            self.pause(try_no, &e).await;
            last = Some(e);
        }
        Err(last.unwrap_or_else(no_attempt))
    }

    /// Tries for a probe ([`Backend::lease_fate`],
    /// [`Backend::recover_claim`]): three times the attempts. A probe only
    /// reads, so asking longer is free of risk, and giving up early turns
    /// an outcome that is known to the store into one the caller must
    /// report as unknown.
    fn probe_attempts(&self) -> u32 {
        self.attempts.saturating_mul(3)
    }

    /// Sends `call` again after each retryable error, up to `budget` tries:
    /// for calls that are safe to repeat as they are (reads, and calls
    /// that carry their own identity).
    async fn repeating<T, F, Fut>(&self, budget: u32, mut call: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut last = None;
        for try_no in 0..budget {
            match call().await {
                Err(e) if e.is_retryable() => {
                    self.saw(&e);
                    self.pause_within(try_no, budget).await;
                    last = Some(e);
                }
                other => return other,
            }
        }
        Err(last.unwrap_or_else(no_attempt))
    }

    async fn recover(
        &self,
        b: &dyn Backend,
        queue: &QueueName,
        spec: &ClaimSpec,
    ) -> Result<Claimed> {
        self.repeating(self.probe_attempts(), || b.recover_claim(queue, spec))
            .await
    }

    /// [`Backend::enqueue_once`] under `request`, settled: sent again with
    /// the same request after any retryable error, so it is written once.
    pub async fn enqueue(
        &self,
        b: &dyn Backend,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        self.repeating(self.attempts, || {
            b.enqueue_once(queue, request, items.clone())
        })
        .await
    }

    /// What became of `lease`; retryable errors are tried again.
    async fn fate(&self, b: &dyn Backend, lease: &Held) -> Result<LeaseFate> {
        self.repeating(self.probe_attempts(), || {
            b.lease_fate(&lease.key, lease.until)
        })
        .await
    }

    /// What a first send that answered [`Error::LeaseLost`] met: when the
    /// lease had not expired ([`Backend::lease_fate`] says finished, and
    /// no call of this lease can have landed), no reaper or worker took
    /// it, so the store lost it: [`Error::LeaseVanished`]. Otherwise (or
    /// when the fate cannot be read) `lost` as it is.
    pub(crate) async fn lost_or_vanished(
        &self,
        b: &dyn Backend,
        lease: &Held,
        lost: Error,
    ) -> Error {
        match self.fate(b, lease).await {
            Ok(LeaseFate::Finished { .. }) => {
                tracing::warn!(queue = %lease.key.queue, id = %lease.key.id,
                    "lease vanished: the store no longer holds an unexpired lease that no call of its own ended \
                     (a failover that lost writes, an older snapshot, a purge or a removal)");
                Error::LeaseVanished { id: lease.key.id }
            }
            _ => lost,
        }
    }

    /// Runs a fenced call on `lease`; after an unknown outcome asks
    /// [`Backend::lease_fate`]: held → send again; finished by this lease →
    /// `landed(state)`; lost → [`Error::LeaseLost`].
    async fn fenced<T, F, Fut>(
        &self,
        b: &dyn Backend,
        lease: &Held,
        mut send: F,
        landed: impl Fn(Option<ItemState>) -> T,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut last = None;
        let mut maybe_sent = false;
        for try_no in 0..self.attempts {
            let e = match send().await {
                Ok(v) => return Ok(v),
                // A resend of a call that landed finds the lease gone.
                Err(e) if e.is_lease_lost() && maybe_sent => {
                    return match self.fate(b, lease).await {
                        Ok(LeaseFate::Finished { state }) => Ok(landed(state)),
                        Ok(_) | Err(Error::Unsupported { .. }) => Err(e),
                        Err(e2) => Err(unknown(lease, e2)),
                    }
                }
                Err(e) if e.is_lease_lost() => {
                    return Err(self.lost_or_vanished(b, lease, e).await)
                }
                Err(e) if !e.is_retryable() => return Err(e),
                Err(e) => {
                    self.saw(&e);
                    e
                }
            };
            if e.may_have_applied() {
                maybe_sent = true;
                match self.fate(b, lease).await {
                    Ok(LeaseFate::Held) => {}
                    Ok(LeaseFate::Finished { state }) => return Ok(landed(state)),
                    Ok(LeaseFate::Lost) => return Err(Error::LeaseLost { id: lease.key.id }),
                    Err(Error::Unsupported { .. }) => {}
                    Err(e2) if !e2.is_retryable() => return Err(e2),
                    Err(_) => {}
                }
            }
            self.pause(try_no, &e).await;
            last = Some(e);
        }
        Err(last.unwrap_or_else(no_attempt))
    }

    /// [`Backend::ack`], settled.
    pub async fn ack(&self, b: &dyn Backend, lease: &Held) -> Result<()> {
        self.fenced(b, lease, || b.ack(&lease.key), |_| ()).await
    }

    /// [`Backend::release`], settled.
    pub async fn release(
        &self,
        b: &dyn Backend,
        lease: &Held,
        delay: Duration,
    ) -> Result<Released> {
        self.fenced(b, lease, || b.release(&lease.key, delay), released_as)
            .await
    }

    /// [`Backend::give_back`], settled.
    pub async fn give_back(&self, b: &dyn Backend, lease: &Held) -> Result<()> {
        self.fenced(b, lease, || b.give_back(&lease.key), |_| ())
            .await
    }

    /// [`Backend::fail`], settled.
    pub async fn fail(&self, b: &dyn Backend, lease: &Held, reason: &str) -> Result<()> {
        self.fenced(b, lease, || b.fail(&lease.key, reason), |_| ())
            .await
    }

    /// [`crate::Control::snooze`], settled; [`Error::Unsupported`] on a
    /// backend without the Control group.
    pub async fn snooze(&self, b: &dyn Backend, lease: &Held, delay: Duration) -> Result<Released> {
        let control = crate::BackendExt::control(b)?;
        self.fenced(b, lease, || control.snooze(&lease.key, delay), released_as)
            .await
    }

    /// [`crate::History::complete`], settled; [`Error::Unsupported`] on a
    /// backend without the History group.
    pub async fn complete(&self, b: &dyn Backend, lease: &Held, result: Bytes) -> Result<()> {
        let history = crate::BackendExt::history(b)?;
        self.fenced(
            b,
            lease,
            || history.complete(&lease.key, result.clone()),
            |_| (),
        )
        .await
    }

    /// [`Backend::ack_many`], settled: after an unknown outcome each lease's
    /// fate decides its slot, and only the leases still held are sent again.
    pub async fn ack_many(&self, b: &dyn Backend, leases: &[Held]) -> Result<Vec<Result<()>>> {
        let mut out: Vec<Option<Result<()>>> = leases.iter().map(|_| None).collect();
        let mut open: Vec<usize> = (0..leases.len()).collect();
        let mut maybe_sent = false;
        let mut last = None;
        for try_no in 0..self.attempts {
            if open.is_empty() {
                break;
            }
            let keys: Vec<LeaseKey> = open.iter().map(|&i| leases[i].key.clone()).collect();
            let e = match b.ack_many(&keys).await {
                Ok(results) if results.len() == keys.len() => {
                    for (&i, r) in open.iter().zip(results) {
                        out[i] = Some(match r {
                            // A resend that finds the lease gone may have
                            // found its own first send's work.
                            Err(e) if e.is_lease_lost() && maybe_sent => {
                                match self.fate(b, &leases[i]).await {
                                    Ok(LeaseFate::Finished { .. }) => Ok(()),
                                    Ok(_) | Err(Error::Unsupported { .. }) => Err(e),
                                    Err(e2) => Err(unknown(&leases[i], e2)),
                                }
                            }
                            Err(e) if e.is_lease_lost() => {
                                Err(self.lost_or_vanished(b, &leases[i], e).await)
                            }
                            r => r,
                        });
                    }
                    open.clear();
                    break;
                }
                Ok(results) => {
                    return Err(Error::Corrupt {
                        what: format!(
                            "the backend answered an ack of {} leases with {} results",
                            keys.len(),
                            results.len()
                        ),
                    })
                }
                Err(e) if !e.is_retryable() => return Err(e),
                Err(e) => {
                    self.saw(&e);
                    e
                }
            };
            if e.may_have_applied() {
                maybe_sent = true;
                let mut still = Vec::with_capacity(open.len());
                for &i in &open {
                    match self.fate(b, &leases[i]).await {
                        Ok(LeaseFate::Held) => still.push(i),
                        Ok(LeaseFate::Finished { .. }) => out[i] = Some(Ok(())),
                        Ok(LeaseFate::Lost) => {
                            out[i] = Some(Err(Error::LeaseLost {
                                id: leases[i].key.id,
                            }))
                        }
                        Err(Error::Unsupported { .. }) => return Err(e),
                        Err(e2) if !e2.is_retryable() => return Err(e2),
                        Err(_) => return Err(e),
                    }
                }
                open = still;
            }
            if !open.is_empty() {
                self.pause(try_no, &e).await;
            }
            last = Some(e);
        }
        if !open.is_empty() {
            return Err(last.unwrap_or_else(no_attempt));
        }
        Ok(out
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::invalid("no result"))))
            .collect())
    }
}

/// A resend found `lease` gone and its fate could not be read: whether
/// the first send landed is unknown.
fn unknown(lease: &Held, probe: Error) -> Error {
    Error::outcome_unknown(
        format!(
            "item {}: a resend found the lease gone, and what ended it could not be read",
            lease.key.id
        ),
        probe,
    )
}

/// What a release that landed did, judged from where the item is now.
fn released_as(state: Option<ItemState>) -> Released {
    match state {
        Some(ItemState::Scheduled) => Released::Scheduled,
        Some(ItemState::Dead) => Released::Dead,
        // Ready, or already claimed again or acked by someone else.
        _ => Released::Ready,
    }
}

/// The error of a helper that made no attempt (`attempts` is at least 1, so
/// only a broken invariant gets here).
fn no_attempt() -> Error {
    Error::invalid("no attempt was made")
}
