//! The seam between the backend and a Redis client crate: what another
//! client needs to implement ([`ScriptClient`]) to run the scripts
//! ([`Script`]) and hand back their replies ([`Reply`]). The two adapters
//! this crate ships, each by its feature:
#![cfg_attr(feature = "redis-rs", doc = "[`RedisRsClient`] (`redis-rs`)")]
#![cfg_attr(not(feature = "redis-rs"), doc = "`RedisRsClient` (`redis-rs`)")]
//! and
#![cfg_attr(feature = "fred", doc = "[`FredClient`] (`fred`).")]
#![cfg_attr(not(feature = "fred"), doc = "`FredClient` (`fred`).")]

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use leaseq_core::BoxError;

#[cfg(feature = "fred")]
mod fred;
#[cfg(feature = "redis-rs")]
mod redis_rs;

pub use crate::reply::Reply;
pub use crate::scripts::Script;
#[cfg(feature = "fred")]
pub use fred::{FredBackend, FredClient};
#[cfg(feature = "redis-rs")]
pub use redis_rs::{RedisRsBackend, RedisRsClient};

/// What a client adapter reports when a call fails.
#[derive(Debug)]
pub struct ClientError {
    /// The server's error line (`"WRONGTYPE ..."`, `"LEASEQ_CORRUPT ..."`)
    /// when the server answered with an error; `None` for connection,
    /// timeout and protocol failures.
    pub server_message: Option<String>,
    /// True when the command certainly never reached a server: no
    /// connection could be made (refused, no node for the slot), or the
    /// client failed it before writing it. Such a failure becomes
    /// [`leaseq_core::Error::Unavailable`]; any other transport failure may
    /// have been applied and becomes [`leaseq_core::Error::OutcomeUnknown`].
    pub unsent: bool,
    /// The client's error.
    pub source: BoxError,
}

impl ClientError {
    /// A failure that is not a server error reply, after which the command
    /// may have reached the server (a dropped connection, a timeout).
    pub fn transport(source: impl Into<BoxError>) -> Self {
        ClientError {
            server_message: None,
            unsent: false,
            source: source.into(),
        }
    }

    /// A failure before the command was written to any server (see
    /// [`ClientError::unsent`]).
    pub fn unsent(source: impl Into<BoxError>) -> Self {
        ClientError {
            server_message: None,
            unsent: true,
            source: source.into(),
        }
    }

    /// An error reply from the server.
    pub fn server(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        ClientError {
            server_message: Some(message.into()),
            unsent: false,
            source: source.into(),
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.server_message {
            Some(m) => write!(f, "server error: {m}"),
            None => write!(f, "{}", self.source),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

/// One node's answer to [`ScriptClient::admin`].
#[derive(Debug)]
pub struct NodeReply {
    /// The node (`host:port` on a cluster, the server URL on one server).
    pub node: String,
    /// Its reply (a RESP3 map arrives flattened into an array of key,
    /// value, key, value...), or its error.
    pub reply: Result<Reply, ClientError>,
}

/// What a Redis client must offer the backend: running a script, and a
/// blocking wait for wake-up markers (and, for the checks of the server's
/// settings, plain commands on every node). Both clients implement it;
/// everything else (scripts, keys, decoding) is shared.
#[async_trait]
pub trait ScriptClient: Send + Sync + fmt::Debug + 'static {
    /// Runs `script` by `EVALSHA`; on `NOSCRIPT` loads it and runs it again.
    async fn eval(
        &self,
        script: &Script,
        keys: &[String],
        args: &[Bytes],
    ) -> Result<Reply, ClientError>;

    /// Runs `script` as [`ScriptClient::eval`] does, followed on the same
    /// connection by `WAIT replicas timeout_ms` (on a cluster, sent to the
    /// node that ran the script), both in one round trip. Returns the
    /// script's reply with what `WAIT` answered: the number of replicas
    /// that acknowledged every write the connection had made, or its error.
    /// A script that failed fails the call, whatever `WAIT` said.
    ///
    /// The default runs nothing and fails as unsent
    /// ([`leaseq_core::Error::Unavailable`]): an adapter that cannot pipeline
    /// a `WAIT` on the script's connection cannot offer
    /// [`crate::RedisOptions::wait_for_replicas`].
    async fn eval_wait(
        &self,
        script: &Script,
        keys: &[String],
        args: &[Bytes],
        replicas: u32,
        timeout_ms: u64,
    ) -> Result<(Reply, Result<i64, ClientError>), ClientError> {
        let _ = (script, keys, args, replicas, timeout_ms);
        Err(ClientError::unsent(
            "this client adapter cannot wait for replicas",
        ))
    }

    /// Pops a marker from the list `key`, waiting up to `timeout` on a
    /// connection of its own (so waiting never delays other calls).
    /// `Ok(true)` when a marker was popped, `Ok(false)` on timeout.
    async fn wait_marker(&self, key: &str, timeout: Duration) -> Result<bool, ClientError>;

    /// Runs one plain command with no keys (`CONFIG GET maxmemory-policy`,
    /// `INFO server`) on every server that holds data: the one server, or
    /// each master of a cluster. Used at connect to read the server's
    /// settings, and by the reaper to read `maxmemory-policy` again (see
    /// [`crate::RedisBackend::verify_server`]).
    ///
    /// The default runs nothing and fails: the checks then warn that the
    /// settings could not be read and go on.
    async fn admin(&self, args: &[&str]) -> Result<Vec<NodeReply>, ClientError> {
        let _ = args;
        Err(ClientError::unsent(
            "this client adapter runs no admin commands",
        ))
    }

    /// Reads up to [`STREAM_BATCH`] entries of the stream `key` after the
    /// entry id `after` (`XREAD ... BLOCK`), waiting up to `timeout` on a
    /// connection of its own, as [`ScriptClient::wait_marker`] does.
    /// Answers the reply as the server gave it ([`Reply::Nil`] on timeout).
    /// Feeds the workers' cancel signal (`src/cancel_feed.rs`).
    ///
    /// The default reads nothing and fails: cancels then reach workers at
    /// their heartbeat only.
    async fn wait_stream(
        &self,
        key: &str,
        after: &str,
        timeout: Duration,
    ) -> Result<Reply, ClientError> {
        let _ = (key, after, timeout);
        Err(ClientError::unsent(
            "this client adapter cannot read streams",
        ))
    }
}

/// The most stream entries one [`ScriptClient::wait_stream`] reads.
pub const STREAM_BATCH: u32 = 64;

/// What `WAIT` answered, as the count of replicas that acknowledged.
#[cfg_attr(not(any(feature = "redis-rs", feature = "fred")), allow(dead_code))]
pub(crate) fn replicas_acked(waited: Result<Reply, ClientError>) -> Result<i64, ClientError> {
    match waited? {
        Reply::Int(n) => Ok(n),
        other => Err(ClientError::transport(format!(
            "WAIT answered {other:?}, not a count"
        ))),
    }
}

/// Seconds for a blocking pop: at least 1 ms, whole ms.
#[cfg_attr(not(any(feature = "redis-rs", feature = "fred")), allow(dead_code))]
pub(crate) fn block_secs(timeout: Duration) -> f64 {
    (timeout.as_millis().max(1) as f64) / 1000.0
}

/// A pool of idle dedicated connections for blocking pops.
#[cfg_attr(not(any(feature = "redis-rs", feature = "fred")), allow(dead_code))]
#[derive(Debug)]
pub(crate) struct IdlePool<T> {
    idle: std::sync::Mutex<Vec<T>>,
    cap: usize,
}

#[cfg_attr(not(any(feature = "redis-rs", feature = "fred")), allow(dead_code))]
impl<T> IdlePool<T> {
    pub(crate) fn new(cap: usize) -> Self {
        IdlePool {
            idle: std::sync::Mutex::new(Vec::new()),
            cap,
        }
    }

    pub(crate) fn take(&self) -> Option<T> {
        self.idle.lock().ok().and_then(|mut v| v.pop())
    }

    /// Keeps `conn` for the next waiter, or hands it back when the pool is
    /// full.
    pub(crate) fn give_back(&self, conn: T) -> Option<T> {
        match self.idle.lock() {
            Ok(mut v) if v.len() < self.cap => {
                v.push(conn);
                None
            }
            _ => Some(conn),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_pops_wait_at_least_a_millisecond() {
        assert_eq!(block_secs(Duration::ZERO), 0.001);
        assert_eq!(block_secs(Duration::from_millis(1500)), 1.5);
    }

    #[test]
    fn the_idle_pool_keeps_at_most_its_cap() {
        let pool = IdlePool::new(1);
        assert_eq!(pool.give_back(1), None);
        assert_eq!(pool.give_back(2), Some(2));
        assert_eq!(pool.take(), Some(1));
        assert_eq!(pool.take(), None);
    }
}
