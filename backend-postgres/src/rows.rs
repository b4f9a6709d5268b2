//! Decoding rows into the core's types, and errors into the core's error.

use leaseq_core::{Bytes, Error, ItemInfo, LeaseToken, QueueName, Result};
use sqlx::postgres::PgRow;
use sqlx::Row;

pub(crate) use leaseq_core::stored::{
    item_id, limit, millis, signed_id as sql_id, state, timestamp as ts,
};

/// A stored queue name, or `None` (logged) for a name written around the
/// backend that it would refuse: no call could name that queue.
pub(crate) fn queue_name(raw: String) -> Option<QueueName> {
    match QueueName::new(&raw) {
        Ok(q) => Some(q),
        Err(e) => {
            tracing::warn!(queue = %raw, error = %e, "leaseq-postgres: a row names a queue no call can name; left out of the listing");
            None
        }
    }
}

/// Wraps a client or server error with what was being done, as
/// [`Error::Rejected`] when the server refused the statement for a reason
/// a resend will not change (see [`rejected_sqlstate`]),
/// [`Error::Unavailable`] when the statement certainly did not run (or was
/// rolled back, so sending it again is safe; see [`certainly_not_applied`]),
/// otherwise as [`Error::OutcomeUnknown`] (its outcome is unknown).
pub(crate) fn db(what: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |e| {
        let code = sqlstate(&e);
        let message = match code.as_deref().and_then(setup_hint) {
            Some(hint) => format!("postgres: {what}: {hint}"),
            None => format!("postgres: {what}"),
        };
        if code.as_deref().is_some_and(rejected_sqlstate) {
            Error::rejected(message, e)
        } else if certainly_not_applied(&e) {
            Error::unavailable(message, e)
        } else {
            Error::outcome_unknown(message, e)
        }
    }
}

/// SQLSTATEs of a statement the server refused for good: class 42 (access
/// rule violations: permission denied, an undefined table, column or
/// function), 3F (an invalid schema name), 28 (invalid authorization: a
/// bad password, an unknown role) and 0A (a feature not supported). Each
/// fails the statement before it applies anything (its transaction is
/// rolled back), and the same statement fails again until someone fixes
/// the grant, the schema or the server.
fn rejected_sqlstate(code: &str) -> bool {
    matches!(code.get(..2), Some("42" | "3F" | "28" | "0A"))
}

/// Wraps an error met before anything was sent for the call (acquiring or
/// opening a connection, beginning a transaction): always
/// [`Error::Unavailable`], since nothing can have been applied.
/// A login the server refuses (SQLSTATE 28P01, a wrong password; 28000, a
/// role that does not exist or no `pg_hba.conf` line for the connection)
/// or a database that does not exist (3D000) is [`Error::Rejected`]
/// instead, and says what to fix: the server answered, and trying again
/// cannot help until someone changes the URL or the server's setup.
pub(crate) fn refused(what: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |e| match sqlstate(&e).as_deref().and_then(setup_hint) {
        Some(hint) => Error::rejected(format!("postgres: {what}: {hint}"), e),
        None => Error::unavailable(format!("postgres: {what}"), e),
    }
}

/// The SQLSTATE of a server error.
fn sqlstate(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Database(d) => d.code().map(|c| c.into_owned()),
        _ => None,
    }
}

/// What to do about a server error that comes from the setup, not the
/// call: a schema never migrated (an undefined table or schema), a
/// login the server refused, or a database that does not exist.
fn setup_hint(code: &str) -> Option<&'static str> {
    match code {
        "42P01" | "3F000" => Some(
            "the schema has no leaseq tables: run `leaseq migrate` \
             (or connect with migrations on)",
        ),
        "28P01" => Some(
            "authentication failed: check the user and password in the URL \
             (and the server's pg_hba.conf)",
        ),
        "28000" => Some(
            "the server refused this user or this connection: check that the user in \
             the URL exists (`createuser`) and that pg_hba.conf has a line for this \
             user, database and host",
        ),
        "3D000" => Some(
            "the database named in the URL does not exist on this server: \
             create it (`createdb`) or fix the URL",
        ),
        _ => None,
    }
}

/// Whether `e` proves that the statement it came from changed nothing:
///
/// - No connection could be had: the pool timed out waiting for one (the
///   server refused or did not answer the connect) or is closed, the
///   connect was refused, or the TLS handshake failed. Nothing was sent.
/// - The server answered with an error of SQLSTATE class 08 (connection
///   exception), 40 (transaction rollback: serialization failure,
///   deadlock; not 40003, "statement completion unknown"), 53
///   (insufficient resources) or 57 (operator intervention: admin
///   shutdown, cannot connect now, a cancelled statement). PostgreSQL
///   raises these before the statement's transaction commits (interrupts
///   are held while a commit runs, and an autocommit statement of the
///   extended protocol commits only at the `Sync` after it), so the
///   transaction they end is rolled back.
///
/// Everything else is unknown: an IO error or a connection dropped while
/// the statement was in flight, a client-side timeout, a protocol or decode
/// error, and any other server error.
pub(crate) fn certainly_not_applied(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Tls(_) => true,
        sqlx::Error::Io(io) => io.kind() == std::io::ErrorKind::ConnectionRefused,
        sqlx::Error::Database(d) => d.code().is_some_and(|code| refused_sqlstate(&code)),
        _ => false,
    }
}

/// SQLSTATEs after which nothing was applied (see [`certainly_not_applied`]).
fn refused_sqlstate(code: &str) -> bool {
    match code.get(..2) {
        Some("08" | "53" | "57") => true,
        Some("40") => code != "40003",
        _ => false,
    }
}

/// Reads column `idx` of `row`, as a backend error when it fails.
pub(crate) fn col<'r, T>(row: &'r PgRow, idx: usize) -> Result<T>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    row.try_get(idx).map_err(db("decoding a row"))
}

/// A stored counter (attempts) as `u32`.
pub(crate) fn count(raw: i32, what: &str) -> Result<u32> {
    leaseq_core::stored::count(raw.into(), what)
}

/// A stored token.
pub(crate) fn token(raw: uuid::Uuid) -> LeaseToken {
    LeaseToken::from_u128(raw.as_u128())
}

/// A token as the database stores it.
pub(crate) fn sql_token(t: LeaseToken) -> uuid::Uuid {
    uuid::Uuid::from_u128(t.as_u128())
}

/// A row of the inspection columns (see `sql::info_columns`).
pub(crate) fn info(row: &PgRow) -> Result<ItemInfo> {
    let payload: Option<Vec<u8>> = col(row, 2)?;
    let due: Option<i64> = col(row, 7)?;
    let progress: Option<Vec<u8>> = col(row, 10)?;
    Ok(ItemInfo {
        id: item_id(col(row, 0)?)?,
        state: state(&col::<String>(row, 1)?)?,
        payload: Bytes::from(payload.unwrap_or_default()),
        priority: col(row, 3)?,
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

/// Epoch milliseconds of a timestamptz expression, clamped to about
/// ±300,000 years: a planted `infinity` (which the column type allows)
/// reads as a far time instead of failing the statement that reads it (a
/// claim would fail on that row every time, and hold up its queue).
pub(crate) fn ms(expr: &str) -> String {
    format!("(floor(greatest(least(extract(epoch FROM {expr}), 1e13), -1e13) * 1000))::bigint")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server error with a SQLSTATE, as sqlx reports one.
    #[derive(Debug)]
    struct ServerError(&'static str, &'static str);

    impl std::fmt::Display for ServerError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.1)
        }
    }

    impl std::error::Error for ServerError {}

    impl sqlx::error::DatabaseError for ServerError {
        fn message(&self) -> &str {
            self.1
        }
        fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
            Some(self.0.into())
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    fn server_error(code: &'static str, message: &'static str) -> sqlx::Error {
        sqlx::Error::Database(Box::new(ServerError(code, message)))
    }

    /// The whole message, causes included, as a user reads it.
    fn shown(e: &Error) -> String {
        let mut text = e.to_string();
        let mut cause = std::error::Error::source(e);
        while let Some(c) = cause {
            text.push_str(&format!(": {c}"));
            cause = c.source();
        }
        text
    }

    #[test]
    fn a_refused_login_says_authentication_failed_and_is_not_retried() {
        let e = refused("connecting")(server_error(
            "28P01",
            "password authentication failed for user \"app\"",
        ));
        assert!(matches!(e, Error::Rejected { .. }), "{e:?}");
        assert!(!e.is_retryable());
        let text = shown(&e);
        assert!(
            text.contains("authentication failed for user \"app\"")
                && text.contains("check the user and password"),
            "{text}"
        );
        assert!(!text.contains("unavailable"), "{text}");
        // A role the server does not know, or a connection pg_hba.conf has
        // no line for: refused too, with both fixes named.
        for message in [
            "role \"app\" does not exist",
            "no pg_hba.conf entry for host \"127.0.0.1\"",
        ] {
            let e = refused("connecting")(server_error("28000", message));
            assert!(matches!(e, Error::Rejected { .. }), "{e:?}");
            let text = shown(&e);
            assert!(
                text.contains(message)
                    && text.contains("`createuser`")
                    && text.contains("pg_hba.conf has a line"),
                "{text}"
            );
        }
        // A server out of reach is unavailable.
        let e = refused("connecting")(sqlx::Error::PoolTimedOut);
        assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
    }

    #[test]
    fn a_schema_without_tables_names_leaseq_migrate() {
        let e = db("stats")(server_error(
            "42P01",
            "relation \"app.leaseq_items\" does not exist",
        ));
        assert!(matches!(e, Error::Rejected { .. }), "{e:?}");
        assert!(shown(&e).contains("run `leaseq migrate`"), "{}", shown(&e));
        let e = db("stats")(server_error("23505", "duplicate key"));
        assert!(!shown(&e).contains("migrate"), "{}", shown(&e));
    }

    #[test]
    fn sqlstates_that_prove_nothing_was_applied() {
        for code in [
            "08000", "08006", "08P01", "40001", "40P01", "53100", "53200", "53300", "57014",
            "57P01", "57P03",
        ] {
            assert!(refused_sqlstate(code), "{code}");
        }
        for code in ["40003", "23505", "42P01", "55P03", "XX000", "", "4"] {
            assert!(!refused_sqlstate(code), "{code}");
        }
    }

    #[test]
    fn sqlstates_a_resend_cannot_change_are_rejections() {
        for code in [
            "42501", "42P01", "42883", "42703", "3F000", "28P01", "28000", "0A000",
        ] {
            assert!(rejected_sqlstate(code), "{code}");
        }
        for code in [
            "40001", "40P01", "08006", "57014", "53300", "23505", "XX000", "", "4",
        ] {
            assert!(!rejected_sqlstate(code), "{code}");
        }
    }

    #[test]
    fn client_errors_are_classified_by_when_they_happen() {
        use std::io::{Error as Io, ErrorKind};
        assert!(certainly_not_applied(&sqlx::Error::PoolTimedOut));
        assert!(certainly_not_applied(&sqlx::Error::PoolClosed));
        assert!(certainly_not_applied(&sqlx::Error::Io(Io::from(
            ErrorKind::ConnectionRefused
        ))));
        for kind in [
            ErrorKind::ConnectionReset,
            ErrorKind::BrokenPipe,
            ErrorKind::UnexpectedEof,
            ErrorKind::TimedOut,
        ] {
            assert!(!certainly_not_applied(&sqlx::Error::Io(Io::from(kind))));
        }
        assert!(!certainly_not_applied(&sqlx::Error::Protocol("x".into())));
        let e = db("testing")(sqlx::Error::PoolTimedOut);
        assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
        let e = db("testing")(sqlx::Error::Io(Io::from(ErrorKind::UnexpectedEof)));
        assert!(matches!(e, Error::OutcomeUnknown { .. }), "{e:?}");
    }
}
