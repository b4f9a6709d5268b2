//! Decoding rows into the core's types, and errors into the core's error.

use leaseq_core::{Bytes, Error, ItemId, ItemInfo, LeaseToken, QueueName, Result};
use sqlx::sqlite::SqliteRow;
use sqlx::Row;

pub(crate) use leaseq_core::stored::{
    count, item_id, limit, millis, signed_id as sql_id, state, timestamp as ts,
};

/// SQLite's primary result codes for "another connection holds the lock".
const SQLITE_BUSY: i64 = 5;
const SQLITE_LOCKED: i64 = 6;

/// SQLite's primary result codes for a refusal a retry cannot change.
const SQLITE_PERM: i64 = 3;
const SQLITE_READONLY: i64 = 8;
const SQLITE_AUTH: i64 = 23;

/// Wraps an error with what was being done: [`Error::Rejected`] when the
/// statement was refused for good (see [`rejected`]), [`Error::Unavailable`]
/// when it certainly changed nothing (see [`certainly_not_applied`]), so
/// sending it again is safe; otherwise [`Error::OutcomeUnknown`].
pub(crate) fn db(what: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |e| {
        let message = if no_tables(&e) {
            format!(
                "sqlite: {what}: the file has no leaseq tables: run `leaseq migrate` \
                 (or connect with migrations on)"
            )
        } else {
            format!("sqlite: {what}")
        };
        if rejected(&e) {
            Error::rejected(message, e)
        } else if certainly_not_applied(&e) {
            Error::unavailable(message, e)
        } else {
            Error::outcome_unknown(message, e)
        }
    }
}

/// Whether `e` says a table is missing: a file never migrated.
fn no_tables(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.message().starts_with("no such table"))
}

/// Wraps an error met before anything was sent for the call (a connection
/// to be had, a transaction to begin): always [`Error::Unavailable`].
pub(crate) fn refused(what: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |e| Error::unavailable(format!("sqlite: {what}"), e)
}

/// Whether `e` proves that its statement changed nothing:
///
/// - No connection could be had (the pool timed out or is closed).
/// - `SQLITE_BUSY` or `SQLITE_LOCKED` (any extended code of them): the
///   lock the statement needed was held by another connection for longer
///   than the busy timeout. A write statement takes the write lock before
///   it changes anything, and a failed `COMMIT` leaves its transaction to
///   be rolled back, so nothing was applied.
///
/// Everything else is unknown (an I/O error, a full disk, a worker thread
/// that went away).
pub(crate) fn certainly_not_applied(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => true,
        sqlx::Error::Database(d) => d.code().is_some_and(|c| is_busy_code(&c)),
        _ => false,
    }
}

/// Whether an extended result code (as text) is `SQLITE_BUSY` or
/// `SQLITE_LOCKED`: the primary code is its low byte.
fn is_busy_code(code: &str) -> bool {
    code.parse::<i64>()
        .is_ok_and(|c| matches!(c & 0xff, SQLITE_BUSY | SQLITE_LOCKED))
}

/// Whether `e` is a refusal that the same statement meets again until
/// someone acts: the file is read-only or denied (`SQLITE_READONLY`,
/// `SQLITE_PERM`, `SQLITE_AUTH`), or the schema is missing (`no such
/// table` / `no such column`: a file never migrated). Each is raised
/// before the statement writes anything.
fn rejected(e: &sqlx::Error) -> bool {
    let sqlx::Error::Database(d) = e else {
        return false;
    };
    let primary = d
        .code()
        .and_then(|c| c.parse::<i64>().ok())
        .map(|c| c & 0xff);
    matches!(primary, Some(SQLITE_PERM | SQLITE_READONLY | SQLITE_AUTH))
        || d.message().starts_with("no such table")
        || d.message().starts_with("no such column")
}

/// Reads column `idx` of `row`, as a backend error when it fails.
pub(crate) fn col<'r, T>(row: &'r SqliteRow, idx: usize) -> Result<T>
where
    T: sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
{
    row.try_get(idx).map_err(db("decoding a row"))
}

/// A stored queue name, or `None` (logged) for a name written around the
/// backend that it would refuse: no call could name that queue.
pub(crate) fn queue_name(raw: String) -> Option<QueueName> {
    match QueueName::new(&raw) {
        Ok(q) => Some(q),
        Err(e) => {
            tracing::warn!(queue = %raw, error = %e, "leaseq-sqlite: a row names a queue no call can name; left out of the listing");
            None
        }
    }
}

/// The id of a fenced call: an id over `i64::MAX` names no row (ids are
/// never negative), so the call finds nothing and the lease is lost.
pub(crate) fn fenced_id(id: ItemId) -> i64 {
    sql_id(id).unwrap_or(-1)
}

/// A stored priority as `i32`.
pub(crate) fn priority(raw: i64) -> Result<i32> {
    i32::try_from(raw).map_err(|_| Error::Corrupt {
        what: format!("priority out of range: {raw}"),
    })
}

/// A stored token: 16 bytes, big-endian.
pub(crate) fn token(raw: &[u8]) -> Result<LeaseToken> {
    let bytes: [u8; 16] = raw.try_into().map_err(|_| Error::Corrupt {
        what: format!("a token of {} bytes", raw.len()),
    })?;
    Ok(LeaseToken::from_u128(u128::from_be_bytes(bytes)))
}

/// A token as SQLite stores it.
pub(crate) fn sql_token(t: LeaseToken) -> Vec<u8> {
    t.as_u128().to_be_bytes().to_vec()
}

/// A row of the inspection columns (`sql::info!`).
pub(crate) fn info(row: &SqliteRow) -> Result<ItemInfo> {
    let payload: Option<Vec<u8>> = col(row, 2)?;
    let due: Option<i64> = col(row, 7)?;
    let progress: Option<Vec<u8>> = col(row, 10)?;
    Ok(ItemInfo {
        id: item_id(col(row, 0)?)?,
        state: state(&col::<String>(row, 1)?)?,
        payload: Bytes::from(payload.unwrap_or_default()),
        priority: priority(col(row, 3)?)?,
        attempts: count(col(row, 4)?, "attempts")?,
        max_attempts: count(col(row, 5)?, "max_attempts")?,
        dedup_key: col(row, 6)?,
        due_at: due.map(ts),
        last_error: col(row, 8)?,
        enqueued_at: ts(col(row, 9)?),
        progress: progress.map(Bytes::from),
        cancel_requested: col(row, 11)?,
    })
}

/// An error inside a transaction that was not committed: rolled back, so
/// nothing of the call was applied.
pub(crate) fn unapplied(what: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |e| Error::unavailable(format!("sqlite: {what}"), e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_and_locked_codes_are_recognised_with_their_extensions() {
        // SQLITE_BUSY, SQLITE_LOCKED, SQLITE_BUSY_RECOVERY,
        // SQLITE_BUSY_SNAPSHOT, SQLITE_LOCKED_SHAREDCACHE.
        for code in ["5", "6", "261", "517", "262"] {
            assert!(is_busy_code(code), "{code}");
        }
        // SQLITE_ERROR, SQLITE_FULL, SQLITE_CONSTRAINT_CHECK, SQLITE_IOERR.
        for code in ["1", "13", "275", "10", "", "x"] {
            assert!(!is_busy_code(code), "{code}");
        }
    }

    #[test]
    fn tokens_round_trip_as_big_endian_blobs() {
        let t = LeaseToken::random();
        assert_eq!(token(&sql_token(t)).ok(), Some(t));
        assert!(token(&[1, 2, 3]).is_err());
        let low = sql_token(LeaseToken::from_u128(1));
        let high = sql_token(LeaseToken::from_u128(1 << 64));
        assert!(low < high, "blob order is numeric order");
    }

    #[test]
    fn client_errors_are_classified() {
        assert!(certainly_not_applied(&sqlx::Error::PoolTimedOut));
        assert!(certainly_not_applied(&sqlx::Error::PoolClosed));
        assert!(!certainly_not_applied(&sqlx::Error::Protocol("x".into())));
        let e = db("testing")(sqlx::Error::PoolTimedOut);
        assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
    }
}
