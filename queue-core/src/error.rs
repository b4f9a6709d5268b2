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

    /// The storage server or client failed: connection refused or dropped,
    /// timeout, a server error. The source is kept.
    #[error("backend error: {message}")]
    Backend {
        /// What the backend was doing.
        message: String,
        /// The underlying client or server error.
        #[source]
        source: BoxError,
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

    /// Builds [`Error::Backend`] from a client error and what was being done.
    pub fn backend(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Backend {
            message: message.into(),
            source: source.into(),
        }
    }

    /// True when the same call may succeed if tried again later (a server or
    /// connection failure). Lost leases and bad input are never retryable.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Backend { .. })
    }

    /// True for [`Error::LeaseLost`].
    pub fn is_lease_lost(&self) -> bool {
        matches!(self, Error::LeaseLost { .. })
    }
}
