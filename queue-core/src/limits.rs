//! Input validation shared by every backend, so bad input is rejected the
//! same way everywhere and before anything is written.

use std::time::Duration;

use crate::{Error, LeaseToken, NewItem, Result};

/// The most items one claim may ask for.
pub const MAX_CLAIM: u32 = 1_000;
/// The most leases one [`crate::Backend::ack_many`] call may carry (as many
/// as one claim hands out).
pub const MAX_ACK_BATCH: usize = MAX_CLAIM as usize;
/// The most items one enqueue call may carry.
pub const MAX_ENQUEUE_BATCH: usize = 1_000;
/// The longest lease one claim or extend may ask for.
pub const MAX_LEASE_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// How far a lease's expiry may lie past the backend's now before reap
/// treats the lease as expired: the longest lease, plus a day for a clock
/// set back. No claim or extend writes an expiry past it; one that does is
/// what a server clock that ran ahead (and was then set right) leaves
/// behind, or a planted value, and would otherwise hold its item for as
/// long as the clock was wrong, or for ever.
pub const LEASE_HORIZON: Duration = Duration::from_secs(MAX_LEASE_TTL.as_secs() + 24 * 3600);
/// The longest delay (enqueue or release) accepted.
pub const MAX_DELAY: Duration = Duration::from_secs(366 * 24 * 3600);
/// The most items one `peek` returns: a larger limit is cut to it, on
/// every backend.
pub const MAX_PEEK: usize = 10_000;
/// The longest dedup key, in bytes (no NUL).
pub const MAX_DEDUP_KEY_LEN: usize = 512;
/// Failure reasons longer than this many bytes are cut to it (on a character
/// boundary); a reason is for people, not for payloads.
pub const MAX_REASON_LEN: usize = 4_096;
/// The most attempts an item may be given; larger values set with
/// [`NewItem::max_attempts`] are clamped to it, so every backend (including
/// those that store a signed 32-bit count) keeps the same number.
pub const MAX_ATTEMPTS: u32 = i32::MAX as u32;
/// The largest progress value a job may record, in bytes
/// ([`crate::Control::progress`]): a percentage or a small JSON object, not
/// a result.
pub const MAX_PROGRESS_LEN: usize = 4_096;
/// The largest encoded worker entry, in bytes
/// ([`crate::WorkerRegistry::register`]).
pub const MAX_WORKER_ENTRY_LEN: usize = 128 * 1024;

/// Checks a progress value against [`MAX_PROGRESS_LEN`].
pub fn check_progress(value: &[u8]) -> Result<()> {
    if value.len() > MAX_PROGRESS_LEN {
        return Err(Error::invalid(format!(
            "progress is {} bytes; the limit is {MAX_PROGRESS_LEN}",
            value.len()
        )));
    }
    Ok(())
}

/// The input bounds of one backend that a user may configure (not to be
/// confused with a queue's throttles, [`crate::QueueLimits`]). A backend
/// reports them in [`crate::Capabilities::bounds`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The largest payload accepted, in bytes.
    pub max_payload_bytes: usize,
}

impl Bounds {
    /// The default payload limit: 1 MiB.
    pub const DEFAULT_MAX_PAYLOAD: usize = 1 << 20;

    /// The default bounds.
    pub const DEFAULT: Bounds = Bounds {
        max_payload_bytes: Self::DEFAULT_MAX_PAYLOAD,
    };

    /// With the largest payload accepted set to `bytes`.
    #[must_use]
    pub const fn max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = bytes;
        self
    }
}

impl Default for Bounds {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// `d` in whole milliseconds, a part millisecond rounded up: what a backend
/// stores for a delay, a hold or a lease, so that none ends earlier than
/// asked (a 1.5 ms delay is due after 2 ms, a 0.5 ms one is Scheduled).
pub fn millis_ceil(d: Duration) -> u64 {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if Duration::from_millis(ms) < d {
        ms.saturating_add(1)
    } else {
        ms
    }
}

/// A lease duration: at least 1 ms, at most [`MAX_LEASE_TTL`], whole
/// milliseconds (finer parts are rounded up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaseTtl(Duration);

impl LeaseTtl {
    /// Validates `ttl`.
    pub fn new(ttl: Duration) -> Result<Self> {
        if ttl.is_zero() {
            return Err(Error::invalid("lease ttl is zero"));
        }
        if ttl > MAX_LEASE_TTL {
            return Err(Error::invalid(format!(
                "lease ttl {ttl:?} is over the limit of {MAX_LEASE_TTL:?}"
            )));
        }
        Ok(LeaseTtl(Duration::from_millis(millis_ceil(ttl).max(1))))
    }

    /// The duration.
    pub fn get(self) -> Duration {
        self.0
    }

    /// Whole milliseconds (never 0).
    pub fn as_millis(self) -> u64 {
        self.0.as_millis() as u64
    }
}

impl TryFrom<Duration> for LeaseTtl {
    type Error = Error;
    fn try_from(d: Duration) -> Result<Self> {
        LeaseTtl::new(d)
    }
}

/// What one claim asks for: up to `max` items, each leased for `ttl`, and
/// the claim's identity: the tokens its leases get.
///
/// **One spec, one claim.** [`crate::Backend::claim`] takes the spec by
/// value, and a spec is neither `Copy` nor `Clone`: a spec sent to a claim
/// cannot be sent to another by accident, because a second claim with the
/// same spec would hand out the same tokens (a stale holder of the first
/// claim's lease could then act on the second's). Make a new spec for
/// every claim. To send the same claim again after a lost reply, or to keep
/// it for [`crate::Backend::recover_claim`] while it is sent, take an
/// explicit [`ClaimSpec::duplicate`].
///
/// ```compile_fail,E0382
/// # use leaseq_core::{Backend, ClaimSpec, QueueName};
/// # async fn twice(b: &dyn Backend, q: &QueueName) -> leaseq_core::Result<()> {
/// let spec = ClaimSpec::new(10, std::time::Duration::from_secs(30))?;
/// let first = b.claim(q, spec).await?;
/// let second = b.claim(q, spec).await?; // error[E0382]: use of moved value: `spec`
/// # let _ = (first, second);
/// # Ok(())
/// # }
/// ```
///
/// ```
/// # use leaseq_core::{Backend, ClaimSpec, QueueName};
/// # async fn twice(b: &dyn Backend, q: &QueueName) -> leaseq_core::Result<()> {
/// // A spec per claim.
/// let first = b.claim(q, ClaimSpec::new(10, std::time::Duration::from_secs(30))?).await?;
/// let second = b.claim(q, ClaimSpec::new(10, std::time::Duration::from_secs(30))?).await?;
/// # let _ = (first, second);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct ClaimSpec {
    max: u32,
    ttl: LeaseTtl,
    request: LeaseToken,
}

/// How long a backend remembers an [`crate::Backend::enqueue_once`]
/// request, so a resend within this window writes nothing twice.
pub const REQUEST_MEMORY: Duration = Duration::from_secs(600);

/// How long a backend keeps the trace of a lease's own finishing call
/// (`ack`, `ack_many`, `release`, `give_back`, `fail`): the (item, token)
/// that ended the lease, which [`crate::Backend::lease_fate`] reads to answer
/// [`crate::LeaseFate::Finished`] also after the lease's expiry. A trace is
/// dropped once it is older than this on the backend's clock (trimmed by the
/// finishing calls and the reap), so what the traces hold is bounded by the
/// finishing calls of this window. [`crate::settle`] asks within seconds of
/// a lost reply; a question asked later than this falls back to the expiry
/// rule of [`crate::Backend::lease_fate`].
pub const FINISH_MEMORY: Duration = Duration::from_secs(60);

/// The most finishing traces ([`FINISH_MEMORY`]) a backend that keeps one
/// per finishing call holds for one queue: past it the oldest is forgotten
/// early, so a queue acking a million items a second holds a bounded set,
/// not a minute of them. A lease whose trace went early is answered by the
/// expiry rule of [`crate::Backend::lease_fate`].
pub const MAX_FINISH_TRACES: usize = 1 << 16;

impl ClaimSpec {
    /// The bits of a token that name its claim (the family); the low 32
    /// bits number the slots.
    pub const FAMILY_MASK: u128 = !0xFFFF_FFFF;

    /// Validates the request: `max` in 1..=[`MAX_CLAIM`] and a valid ttl.
    ///
    /// **One spec per claim.** A spec names its claim's tokens: make a new
    /// one for every claim (see [`ClaimSpec`]).
    ///
    /// The claim gets a fresh random identity ([`ClaimSpec::request`]):
    /// sending the same claim again after a lost reply (a
    /// [`ClaimSpec::duplicate`]) names the same tokens, so
    /// [`crate::Backend::recover_claim`] can find what it leased.
    pub fn new(max: u32, ttl: Duration) -> Result<Self> {
        let family = LeaseToken::random().as_u128() & Self::FAMILY_MASK;
        Self::with_request(max, ttl, LeaseToken::from_u128(family))
    }

    /// Like [`ClaimSpec::new`] with a chosen identity: slot `i` gets token
    /// `request + i` (within `request`'s family of 2^32 tokens). Layers use
    /// it to give sub-claims tokens of their caller's family.
    pub fn with_request(max: u32, ttl: Duration, request: LeaseToken) -> Result<Self> {
        if max == 0 {
            return Err(Error::invalid("claim of 0 items"));
        }
        if max > MAX_CLAIM {
            return Err(Error::invalid(format!(
                "claim of {max} items is over the limit of {MAX_CLAIM}"
            )));
        }
        let slots = u128::from(max);
        if (request.as_u128() & 0xFFFF_FFFF) + slots > 0x1_0000_0000 {
            return Err(Error::invalid(
                "the claim's tokens would leave its request's family",
            ));
        }
        Ok(ClaimSpec {
            max,
            ttl: LeaseTtl::new(ttl)?,
            request,
        })
    }

    /// The same claim again: the same `max`, ttl and tokens. Only for
    /// sending this claim again after its reply was lost, or for keeping it
    /// to call [`crate::Backend::recover_claim`] with while a duplicate is
    /// sent ([`crate::settle::Settle::claim`] does both). A duplicate sent
    /// as a new claim hands out this claim's tokens a second time: a new
    /// claim needs [`ClaimSpec::new`].
    #[must_use]
    pub fn duplicate(&self) -> ClaimSpec {
        ClaimSpec {
            max: self.max,
            ttl: self.ttl,
            request: self.request,
        }
    }

    /// The claim's identity: its first token.
    pub fn request(&self) -> LeaseToken {
        self.request
    }

    /// The token of slot `i` (`i < max`): `request + i`.
    pub fn token(&self, i: u32) -> LeaseToken {
        LeaseToken::from_u128(self.request.as_u128().wrapping_add(u128::from(i)))
    }

    /// True when `token` belongs to this claim's family (its top 96 bits
    /// match the request's), as every token of this claim, and of
    /// sub-claims a layer made from it, does.
    pub fn owns(&self, token: LeaseToken) -> bool {
        token.as_u128() & Self::FAMILY_MASK == self.request.as_u128() & Self::FAMILY_MASK
    }

    /// The family's prefix as 24 lowercase hex digits (the first 24 of a
    /// token's 32), for backends that store tokens as text.
    pub fn family_hex(&self) -> String {
        format!("{:024x}", self.request.as_u128() >> 32)
    }

    /// The most items to claim.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// The lease each claimed item gets.
    pub fn ttl(&self) -> LeaseTtl {
        self.ttl
    }
}

/// Checks a batch for `enqueue` against the contract and `limits`.
/// Backends call this first, so a bad batch writes nothing.
pub fn check_batch(items: &[NewItem], limits: &Bounds) -> Result<()> {
    if items.len() > MAX_ENQUEUE_BATCH {
        return Err(Error::invalid(format!(
            "batch of {} items is over the limit of {MAX_ENQUEUE_BATCH}",
            items.len()
        )));
    }
    for (i, item) in items.iter().enumerate() {
        if item.payload.len() > limits.max_payload_bytes {
            return Err(Error::invalid(format!(
                "item {i}: payload of {} bytes is over the limit of {}",
                item.payload.len(),
                limits.max_payload_bytes
            )));
        }
        if item.max_attempts == 0 {
            return Err(Error::invalid(format!("item {i}: max_attempts is 0")));
        }
        if item.max_attempts > MAX_ATTEMPTS {
            return Err(Error::invalid(format!(
                "item {i}: max_attempts {} is over the limit of {MAX_ATTEMPTS}",
                item.max_attempts
            )));
        }
        check_delay(item.delay).map_err(|e| Error::invalid(format!("item {i}: {e}")))?;
        if let Some(hold) = item.unique_for {
            if item.dedup_key.is_none() {
                return Err(Error::invalid(format!(
                    "item {i}: unique_for needs a dedup key"
                )));
            }
            if hold > MAX_DELAY || hold < Duration::from_millis(1) {
                return Err(Error::invalid(format!(
                    "item {i}: unique_for must be 1 ms to {MAX_DELAY:?}, not {hold:?}"
                )));
            }
        }
        if let Some(key) = &item.dedup_key {
            if key.is_empty() || key.len() > MAX_DEDUP_KEY_LEN {
                return Err(Error::invalid(format!(
                    "item {i}: dedup key must be 1 to {MAX_DEDUP_KEY_LEN} bytes"
                )));
            }
            // Every store can keep a key without NUL; not every store a key with one.
            if key.contains('\0') {
                return Err(Error::invalid(format!(
                    "item {i}: a dedup key must not contain NUL"
                )));
            }
        }
    }
    Ok(())
}

/// Checks a delay for enqueue or release.
pub fn check_delay(delay: Duration) -> Result<()> {
    if delay > MAX_DELAY {
        return Err(Error::invalid(format!(
            "delay {delay:?} is over the limit of {MAX_DELAY:?}"
        )));
    }
    Ok(())
}

/// Checks the size of an [`crate::Backend::ack_many`] batch.
pub fn check_ack_batch(n: usize) -> Result<()> {
    if n > MAX_ACK_BATCH {
        return Err(Error::invalid(format!(
            "ack of {n} leases is over the limit of {MAX_ACK_BATCH}"
        )));
    }
    Ok(())
}

/// Cuts a failure reason to [`MAX_REASON_LEN`] bytes on a character boundary.
pub fn clamp_reason(reason: &str) -> &str {
    if reason.len() <= MAX_REASON_LEN {
        return reason;
    }
    let mut end = MAX_REASON_LEN;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid<T: std::fmt::Debug>(r: Result<T>) -> bool {
        matches!(r, Err(Error::InvalidInput { .. }))
    }

    #[test]
    fn ack_batches_are_bounded() {
        assert!(check_ack_batch(0).is_ok());
        assert!(check_ack_batch(MAX_ACK_BATCH).is_ok());
        assert!(invalid(check_ack_batch(MAX_ACK_BATCH + 1)));
    }

    #[test]
    fn claim_spec_rejects_zero_too_many_and_bad_ttl() {
        let s = Duration::from_secs(1);
        assert!(invalid(ClaimSpec::new(0, s)));
        assert!(invalid(ClaimSpec::new(MAX_CLAIM + 1, s)));
        assert!(invalid(ClaimSpec::new(1_000_000, s)));
        assert!(invalid(ClaimSpec::new(1, Duration::ZERO)));
        assert!(invalid(ClaimSpec::new(
            1,
            Duration::from_secs(10 * 365 * 24 * 3600)
        )));
        assert_eq!(
            ClaimSpec::new(MAX_CLAIM, s).map(|c| c.max()).ok(),
            Some(MAX_CLAIM)
        );
    }

    #[test]
    fn millis_ceil_rounds_only_a_part_millisecond_up() {
        let ms = |us| millis_ceil(Duration::from_micros(us));
        assert_eq!([ms(0), ms(1), ms(999), ms(1000), ms(1001)], [0, 1, 1, 1, 2]);
        assert_eq!(millis_ceil(Duration::MAX), u64::MAX);
    }

    #[test]
    fn ttl_rounds_up_to_whole_milliseconds() {
        assert_eq!(
            LeaseTtl::new(Duration::from_micros(1))
                .map(|t| t.as_millis())
                .ok(),
            Some(1)
        );
        assert_eq!(
            LeaseTtl::new(Duration::from_micros(1500))
                .map(|t| t.as_millis())
                .ok(),
            Some(2)
        );
        assert_eq!(
            LeaseTtl::new(Duration::from_millis(30))
                .map(|t| t.as_millis())
                .ok(),
            Some(30)
        );
    }

    #[test]
    fn batch_checks_payload_attempts_delay_dedup_and_size() {
        let limits = Bounds {
            max_payload_bytes: 8,
        };
        assert!(check_batch(&[NewItem::new(vec![0u8; 8])], &limits).is_ok());
        assert!(invalid(check_batch(&[NewItem::new(vec![0u8; 9])], &limits)));
        assert!(invalid(check_batch(
            &[NewItem::new("x").max_attempts(0)],
            &limits
        )));
        assert!(invalid(check_batch(
            &[NewItem::new("x").delay(MAX_DELAY * 2)],
            &limits
        )));
        assert!(invalid(check_batch(
            &[NewItem::new("x").dedup_key("")],
            &limits
        )));
        let long_key = "k".repeat(MAX_DEDUP_KEY_LEN + 1);
        assert!(invalid(check_batch(
            &[NewItem::new("x").dedup_key(long_key)],
            &limits
        )));
        let many = vec![NewItem::new("x"); MAX_ENQUEUE_BATCH + 1];
        assert!(invalid(check_batch(&many, &limits)));
        assert!(check_batch(&[], &limits).is_ok());
    }

    #[test]
    fn max_attempts_are_clamped_to_the_documented_limit() {
        assert_eq!(
            NewItem::new("x").max_attempts(u32::MAX).max_attempts,
            MAX_ATTEMPTS
        );
        assert_eq!(NewItem::new("x").max_attempts(7).max_attempts, 7);
    }

    #[test]
    fn fields_set_by_hand_past_a_bound_are_refused_at_enqueue() {
        let limits = Bounds::default();
        let mut attempts = NewItem::new("x");
        attempts.max_attempts = MAX_ATTEMPTS + 1;
        assert!(invalid(check_batch(&[attempts], &limits)));
        let mut hold = NewItem::new("x").dedup_key("k");
        hold.unique_for = Some(Duration::ZERO);
        assert!(invalid(check_batch(&[hold], &limits)));
        let mut key = NewItem::new("x");
        key.dedup_key = Some("a\0b".into());
        assert!(invalid(check_batch(&[key], &limits)));
    }

    #[test]
    fn reasons_are_cut_on_a_char_boundary() {
        let long = "é".repeat(MAX_REASON_LEN);
        let cut = clamp_reason(&long);
        assert!(cut.len() <= MAX_REASON_LEN && cut.len() >= MAX_REASON_LEN - 1);
        assert_eq!(clamp_reason("short"), "short");
    }
}
