//! The one error type every backend returns.

use std::error::Error as StdError;

use crate::ItemId;

/// A boxed error from a storage client or server, kept as the source.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a queue operation.
///
/// The variants are semantic: a caller decides what to do from the variant,
/// never from the message text. Use [`Error::is_retryable`] to ask whether the
/// same call may succeed later.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lease's token is no longer the item's current token: the lease
    /// expired and was reaped, re-claimed by another worker, or the item was
    /// acked, released or failed already. Nothing was changed.
    #[error("lease lost: item {id} is no longer held by this lease")]
    LeaseLost {
        /// The item the stale lease named.
        id: ItemId,
    },

    /// The lease vanished: the store no longer holds it (the item is gone,
    /// or no longer Leased under this token), yet the lease had not expired
    /// on the backend's clock and no call of this lease ended it, so no
    /// reaper and no other worker took it. The store lost it: a failover
    /// that lost acknowledged writes (Redis replicas, see `leaseq-redis`),
    /// a restore from an older snapshot, or a purge. Nothing was changed.
    ///
    /// Backends answer such a call [`Error::LeaseLost`]; [`crate::settle`]
    /// tells the two apart with [`crate::Backend::lease_fate`] and reports
    /// this one. [`Error::is_lease_lost`] is true for both: either way the
    /// lease is over.
    #[error("lease vanished: item {id} is no longer held by this lease, and no reaper or other worker took it (the store lost it, or it was purged or removed)")]
    LeaseVanished {
        /// The item the vanished lease named.
        id: ItemId,
    },

    /// The item does not exist in the queue (or not in the state asked for).
    #[error("item {id} not found")]
    NotFound {
        /// The item that was looked up.
        id: ItemId,
    },

    /// The caller passed a value the contract rejects. Nothing was written.
    #[error("invalid input: {what}")]
    InvalidInput {
        /// What was wrong, in words a user can act on.
        what: String,
    },

    /// The call's outcome is unknown: the connection dropped or the call
    /// timed out after it was sent, so the server may have applied it. A
    /// caller retries with the same identity (the same [`crate::ClaimSpec`],
    /// lease or enqueue request), never as a new call: see [`crate::settle`].
    /// The source is kept.
    #[error("outcome unknown: {message}")]
    OutcomeUnknown {
        /// What the backend was doing.
        message: String,
        /// The underlying client or server error.
        #[source]
        source: BoxError,
    },

    /// The server refused the call before running it (connection refused,
    /// out of memory, loading, a cluster slot moving, a statement the server
    /// rejected and rolled back): nothing was applied, so sending the same
    /// call again is safe. The source is kept.
    #[error("backend unavailable: {message}")]
    Unavailable {
        /// What the backend was doing.
        message: String,
        /// The underlying client or server error.
        #[source]
        source: BoxError,
    },

    /// The store is full (a server at its memory limit): the call was
    /// refused before it ran, nothing was written. Consumers keep working
    /// and free space; try again later.
    #[error("store full: {message}")]
    Full {
        /// What was refused.
        message: String,
        /// The underlying client or server error.
        #[source]
        source: BoxError,
    },

    /// The server rejected the call for a reason that sending it again
    /// will not change: permission denied (a role without the privilege,
    /// an ACL), an undefined table or schema (not migrated), an unknown
    /// command or a script error (a server too old, a bug), a bad password.
    /// Nothing was applied: the statement was rolled back, or the command
    /// was refused before it ran. (A Redis script that failed at run time
    /// keeps the writes made before the failing line; leaseq's scripts read
    /// and check everything before their first write, so that takes a bug
    /// in a script.) Fix the cause, then call again:
    /// [`Error::is_retryable`] is false, so neither [`crate::settle`] nor
    /// the worker sends it again. The source is kept.
    #[error("rejected by the server: {message}")]
    Rejected {
        /// What the backend was doing.
        message: String,
        /// The underlying server error.
        #[source]
        source: BoxError,
    },

    /// The backend does not offer this operation.
    #[error("unsupported by this backend: {what}")]
    Unsupported {
        /// The operation.
        what: String,
    },

    /// An event stream fell more than [`crate::events::EVENT_BUFFER`]
    /// events behind its queue: at least `missed` events were dropped for
    /// it, and the stream ends. Events are at most once; subscribe again,
    /// and read what finished meanwhile from the history.
    #[error("event stream lagged: {missed} events were dropped; subscribe again")]
    Lagged {
        /// Events dropped for this stream.
        missed: u64,
    },

    /// Stored data is corrupt in a way self-healing could not repair on the
    /// spot (self-healing that succeeds is reported as a [`crate::Repair`],
    /// not as an error).
    #[error("corrupt queue data: {what}")]
    Corrupt {
        /// What was found.
        what: String,
    },
}

impl Error {
    /// Builds [`Error::InvalidInput`].
    pub fn invalid(what: impl Into<String>) -> Self {
        Error::InvalidInput { what: what.into() }
    }

    /// Builds [`Error::OutcomeUnknown`] from a client error and what was being done.
    pub fn outcome_unknown(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::OutcomeUnknown {
            message: message.into(),
            source: source.into(),
        }
    }

    /// The error of a step inside a transaction that was not committed:
    /// an [`Error::OutcomeUnknown`] becomes [`Error::Unavailable`], since
    /// the rollback undid whatever the step did; any other error stays.
    #[must_use]
    pub fn uncommitted(self) -> Self {
        match self {
            Error::OutcomeUnknown { message, source } => Error::Unavailable { message, source },
            other => other,
        }
    }

    /// Builds [`Error::Unavailable`]: the call certainly did not run.
    pub fn unavailable(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Unavailable {
            message: message.into(),
            source: source.into(),
        }
    }

    /// Builds [`Error::Rejected`].
    pub fn rejected(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Rejected {
            message: message.into(),
            source: source.into(),
        }
    }

    /// [`Error::Rejected`] for a store another build of leaseq migrated:
    /// `newer` when it holds migration `migration` that this build does
    /// not know, else when its migration of that number differs from this
    /// build's. Every process on one store must run the same version, or
    /// an older build writes what a newer one no longer reads.
    pub fn migrated_by_another_build(
        store: &str,
        migration: i64,
        newer: bool,
        source: impl Into<BoxError>,
    ) -> Self {
        let message = if newer {
            format!(
                "{store} was migrated by a newer leaseq: migration {migration} is unknown to \
                 this build; upgrade leaseq (every process on one store runs the same version)"
            )
        } else {
            format!(
                "{store} holds a migration {migration} that differs from this build's: it was \
                 migrated by another build of leaseq; run the same version everywhere"
            )
        };
        Error::rejected(message, source)
    }

    /// Builds [`Error::Full`].
    pub fn full(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Full {
            message: message.into(),
            source: source.into(),
        }
    }

    /// Builds [`Error::Unsupported`].
    pub fn unsupported(what: impl Into<String>) -> Self {
        Error::Unsupported { what: what.into() }
    }

    /// True when the same call may succeed if tried again later (a server or
    /// connection failure, a full store). Lost leases, bad input, corrupt
    /// data and calls the server rejected ([`Error::Rejected`]) are never
    /// retryable.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::OutcomeUnknown { .. } | Error::Unavailable { .. } | Error::Full { .. }
        )
    }

    /// True when the call may have been applied although it failed
    /// ([`Error::OutcomeUnknown`]): resend it only with the same identity.
    pub fn may_have_applied(&self) -> bool {
        matches!(self, Error::OutcomeUnknown { .. })
    }

    /// True for [`Error::LeaseLost`] and [`Error::LeaseVanished`]: the
    /// lease is over and the call changed nothing.
    pub fn is_lease_lost(&self) -> bool {
        matches!(self, Error::LeaseLost { .. } | Error::LeaseVanished { .. })
    }

    /// True for [`Error::LeaseVanished`]: the store lost the lease.
    pub fn is_lease_vanished(&self) -> bool {
        matches!(self, Error::LeaseVanished { .. })
    }
}
