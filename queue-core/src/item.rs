//! Items going in (`NewItem`), leases coming out (`Lease`), and what
//! inspection shows (`ItemInfo`).

use std::fmt;
use std::time::Duration;

use bytes::Bytes;

use crate::{ItemId, LeaseToken, QueueName, Timestamp};

/// The state an item is in. Ack removes an item, so there is no "done" state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ItemState {
    /// Claimable now.
    Ready,
    /// Claimable from its `available_at`.
    Scheduled,
    /// Held by one worker under a token until the lease expires.
    Leased,
    /// Given up on; kept for inspection and redrive.
    Dead,
}

impl ItemState {
    /// Every state, in lifecycle order.
    pub const ALL: [ItemState; 4] = [
        ItemState::Ready,
        ItemState::Scheduled,
        ItemState::Leased,
        ItemState::Dead,
    ];

    /// The lowercase name, as used in storage and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ItemState::Ready => "ready",
            ItemState::Scheduled => "scheduled",
            ItemState::Leased => "leased",
            ItemState::Dead => "dead",
        }
    }
}

impl fmt::Display for ItemState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ItemState {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        ItemState::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                crate::Error::invalid(format!(
                    "unknown state {s:?}; expected ready, scheduled, leased or dead"
                ))
            })
    }
}

/// An item to enqueue, built with chained setters.
///
/// ```
/// use leaseq_core::NewItem;
/// use std::time::Duration;
/// let item = NewItem::new(b"send welcome mail".to_vec())
///     .priority(5)
///     .delay(Duration::from_secs(30))
///     .max_attempts(3)
///     .dedup_key("welcome:42");
/// assert_eq!(item.priority, 5);
/// ```
///
/// The fields are public to read, and to write where a setter is in the
/// way; [`crate::limits::check_batch`] checks every bound at enqueue, so
/// a field set out of bounds is an [`crate::Error::InvalidInput`] there.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewItem {
    /// The bytes a handler receives.
    pub payload: Bytes,
    /// Higher is claimed first; FIFO within one priority.
    pub priority: i32,
    /// How long after enqueue the item becomes claimable.
    pub delay: Duration,
    /// Claims the item gets before it goes Dead: 1 to
    /// [`crate::limits::MAX_ATTEMPTS`].
    pub max_attempts: u32,
    /// The key an unfinished item holds against duplicates.
    pub dedup_key: Option<String>,
    /// How long the dedup key stays held after the ack: 1 ms to
    /// [`crate::limits::MAX_DELAY`].
    pub unique_for: Option<Duration>,
}

impl NewItem {
    /// Attempts allowed when none are set.
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 25;

    /// An item with this payload, priority 0, no delay, default attempts.
    pub fn new(payload: impl Into<Bytes>) -> Self {
        NewItem {
            payload: payload.into(),
            priority: 0,
            delay: Duration::ZERO,
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            dedup_key: None,
            unique_for: None,
        }
    }

    /// Higher is claimed first; FIFO within one priority.
    #[must_use]
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Not claimable until this long after enqueue (Scheduled meanwhile);
    /// backends keep whole milliseconds, a part millisecond rounded up.
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// How many claims the item gets before it goes Dead (at least 1).
    /// Values over [`crate::limits::MAX_ATTEMPTS`] are clamped to it; 0 is
    /// rejected by `enqueue`.
    #[must_use]
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts.min(crate::limits::MAX_ATTEMPTS);
        self
    }

    /// While an unfinished item holds this key, enqueueing another item with
    /// it returns the existing id and writes nothing.
    #[must_use]
    pub fn dedup_key(mut self, key: impl Into<String>) -> Self {
        self.dedup_key = Some(key.into());
        self
    }

    /// Keeps the dedup key held for `hold` after the item is acked: an
    /// enqueue with the key in that time returns the acked item's id with
    /// `deduplicated: true` and writes nothing ("unique for a duration").
    /// Needs a [`NewItem::dedup_key`] (enqueue rejects it without one) and
    /// a backend with [`crate::Capabilities::unique_for`]; the hold runs on
    /// the backend's clock, from the ack. At most
    /// [`crate::limits::MAX_DELAY`]; zero is the same as not setting it.
    #[must_use]
    pub fn unique_for(mut self, hold: Duration) -> Self {
        self.unique_for = (!hold.is_zero()).then_some(hold);
        self
    }
}

/// What `enqueue` did with one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enqueued {
    /// The item's id: new, or the existing holder of the dedup key.
    pub id: ItemId,
    /// True when an unfinished item already held the dedup key, so nothing
    /// was written.
    pub deduplicated: bool,
}

/// The fence of a lease: which item, in which queue, under which token.
/// Every transition out of Leased takes one of these.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseKey {
    /// The queue the item is in.
    pub queue: QueueName,
    /// The item.
    pub id: ItemId,
    /// The token the claim handed out.
    pub token: LeaseToken,
}

/// One claimed item: the fence plus what a worker needs to run it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a lease that is dropped dangles until it expires and spends an attempt"]
pub struct Lease {
    /// Queue, id and token.
    pub key: LeaseKey,
    /// The payload as enqueued.
    pub payload: Bytes,
    /// Claims so far, this one included (1 on the first delivery).
    pub attempts: u32,
    /// Claims allowed before the item goes Dead.
    pub max_attempts: u32,
    /// The item's priority.
    pub priority: i32,
    /// When the lease runs out, on the backend's clock.
    pub expires_at: Timestamp,
    /// When the enqueue that created the item ran, on the backend's clock
    /// (the clock of `expires_at`). Kept across retries, releases, reaps
    /// and redrives.
    pub enqueued_at: Timestamp,
}

impl Lease {
    /// The item's id.
    pub fn id(&self) -> ItemId {
        self.key.id
    }

    /// The fencing token.
    pub fn token(&self) -> LeaseToken {
        self.key.token
    }

    /// True when this claim is the last one the item is allowed.
    pub fn is_last_attempt(&self) -> bool {
        self.attempts >= self.max_attempts
    }
}

impl AsRef<LeaseKey> for Lease {
    fn as_ref(&self) -> &LeaseKey {
        &self.key
    }
}

impl AsRef<LeaseKey> for LeaseKey {
    fn as_ref(&self) -> &LeaseKey {
        self
    }
}

/// One item as inspection (`peek`, `item`) shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemInfo {
    /// The item's id.
    pub id: ItemId,
    /// Its state.
    pub state: ItemState,
    /// Its payload.
    pub payload: Bytes,
    /// Its priority.
    pub priority: i32,
    /// Claims so far.
    pub attempts: u32,
    /// Claims allowed.
    pub max_attempts: u32,
    /// The dedup key, if any.
    pub dedup_key: Option<String>,
    /// For Scheduled: when it becomes claimable. For Leased: when the lease
    /// expires. Otherwise `None`.
    pub due_at: Option<Timestamp>,
    /// The reason given by the last `fail` (or the reaper), if any.
    pub last_error: Option<String>,
    /// When the enqueue that created the item ran, on the backend's clock.
    /// Kept across retries, releases, reaps and redrives.
    pub enqueued_at: Timestamp,
    /// For Leased: the progress its lease recorded
    /// ([`crate::Control::progress`]), if any. Otherwise `None`.
    pub progress: Option<Bytes>,
    /// For Leased: an operator asked to cancel it
    /// ([`crate::Control::cancel`]); it ends Cancelled when its lease ends.
    pub cancel_requested: bool,
}

/// What `release` (or [`crate::Control::snooze`]) did with the item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// Back to Ready (no delay).
    Ready,
    /// Scheduled after the delay.
    Scheduled,
    /// Attempts were exhausted, so it went Dead instead.
    Dead,
    /// A cancel was requested while it was leased, so it ended Cancelled
    /// ([`crate::Control::cancel`]).
    Cancelled,
}

/// What a heartbeat ([`crate::Backend::extend`]) answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extended {
    /// When the lease now expires, on the backend's clock.
    pub expires_at: Timestamp,
    /// An operator asked to cancel the item ([`crate::Control::cancel`]):
    /// the handler should stop; the item ends Cancelled whatever the lease
    /// reports. Always false on a backend without the Control group.
    pub cancel_requested: bool,
}

impl Extended {
    /// A heartbeat's answer with no cancel request.
    pub fn until(expires_at: Timestamp) -> Self {
        Extended {
            expires_at,
            cancel_requested: false,
        }
    }
}

/// What [`crate::Control::cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cancelled {
    /// The item was not leased: it ended Cancelled at once. `was` is the
    /// state it was in (Ready, Scheduled or Dead).
    Now {
        /// Its state before the cancel.
        was: ItemState,
    },
    /// The item is leased: it is marked, its worker learns at its next
    /// heartbeat, and it ends Cancelled when the lease ends.
    Requested,
}

/// What became of a lease whose last call's reply was lost, as
/// [`crate::Backend::lease_fate`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseFate {
    /// The token still holds the item: the lost call did not end the lease
    /// (it did not run, or it was an extend). Send it again.
    Held,
    /// The lease's own call ended it: the lost call landed. Known because
    /// the token no longer holds the item while the lease had not expired
    /// on the backend's clock, so no reaper or other worker can have ended
    /// it (its own call did, or the store lost it); or, past the expiry,
    /// from the backend's traces ([`crate::LeaseTraces`]), whether or not
    /// the lease has expired since. `state` is where the item is now (`None`: gone,
    /// i.e. acked).
    Finished {
        /// The item's state now, `None` when it no longer exists.
        state: Option<ItemState>,
    },
    /// The token no longer holds the item, no trace says its own call ended
    /// the lease, and the lease had expired: a reaper or another worker
    /// ended it. Report the lease lost.
    Lost,
}
