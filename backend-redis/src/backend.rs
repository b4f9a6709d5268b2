//! The backend: a client adapter plus the shared scripts and key layout.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use leaseq_core::{Error, QueueName, Result, StepCounter};

use crate::scripts::Scripts;
use crate::{ClientError, KeyLayout, RedisConfig, Reply, Script, ScriptClient};

/// The Redis backend over any [`ScriptClient`]; see the crate docs for the
/// layout and the scripts. Cloning is cheap and clones share the client.
pub struct RedisBackend<C: ScriptClient> {
    pub(crate) client: Arc<C>,
    pub(crate) config: Arc<RedisConfig>,
    pub(crate) scripts: Arc<Scripts>,
    /// Scripts run per queue, counted only with test hooks on.
    pub(crate) steps: Arc<StepCounter>,
}

impl<C: ScriptClient> Clone for RedisBackend<C> {
    fn clone(&self) -> Self {
        RedisBackend {
            client: Arc::clone(&self.client),
            config: Arc::clone(&self.config),
            scripts: Arc::clone(&self.scripts),
            steps: Arc::clone(&self.steps),
        }
    }
}

impl<C: ScriptClient> fmt::Debug for RedisBackend<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackend")
            .field("client", &self.client)
            .field("prefix", &self.config.prefix)
            .finish()
    }
}

impl<C: ScriptClient> RedisBackend<C> {
    /// A backend over an already connected client adapter.
    pub fn with_client(client: C, config: RedisConfig) -> Result<Self> {
        config.check()?;
        Ok(RedisBackend {
            steps: Arc::new(StepCounter::new(config.test_hooks)),
            client: Arc::new(client),
            config: Arc::new(config),
            scripts: Arc::new(Scripts::new()),
        })
    }

    /// The client adapter.
    pub fn client(&self) -> &C {
        &self.client
    }

    /// The settings.
    pub fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// The keys of `queue` under this backend's prefix.
    pub fn keys(&self, queue: &QueueName) -> Result<KeyLayout> {
        KeyLayout::new(&self.config.prefix, queue)
    }

    /// Runs `script` on `queue`'s keys with `args` after the item prefix.
    pub(crate) async fn run(
        &self,
        script: &Script,
        queue: &QueueName,
        args: Vec<Bytes>,
    ) -> Result<Reply> {
        let keys = self.keys(queue)?;
        self.steps.count(queue);
        let mut full = Vec::with_capacity(args.len() + 1);
        full.push(Bytes::from(keys.item_prefix()));
        full.extend(args);
        let script_keys = keys.script_keys();
        let deadline = tokio::time::Instant::now() + self.config.response_timeout;
        let mut pause = Duration::from_millis(2);
        loop {
            match self.client.eval(script, &script_keys, &full).await {
                Ok(reply) => return Ok(reply),
                // The script did not run (see `not_run`): safe to send again.
                Err(e) if not_run(&e) && tokio::time::Instant::now() + pause < deadline => {
                    tracing::debug!(queue = %queue, script = script.name(), error = %e,
                        "leaseq-redis: slot moving, trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                Err(e) => return Err(map_client_error(script.name(), queue, e)),
            }
        }
    }
}

/// Replies that prove the script did not run, so sending it again (to
/// whichever node owns the slot by then) cannot apply it twice:
/// - `MOVED` / `ASK`: the node refused the command before running it
///   because it does not serve the slot (clients that follow redirections
///   themselves never show these; one that gives up does);
/// - `TRYAGAIN`: the slot is being migrated and the keys are split between
///   nodes, so the node refused the multi-key command, or the script's own
///   first step (see `scripts/common.lua`) found the slot unstable and
///   stopped before any other command;
/// - `CLUSTERDOWN`: the cluster refused every command.
///
/// Connection failures and timeouts are never retried here: the script may
/// have run, and sending it again could apply it twice.
pub(crate) fn not_run(e: &ClientError) -> bool {
    let Some(msg) = &e.server_message else {
        return false;
    };
    ["TRYAGAIN", "MOVED ", "ASK ", "CLUSTERDOWN"]
        .iter()
        .any(|p| msg.starts_with(p))
}

/// Server replies that name corrupt data become [`Error::Corrupt`]; every
/// other failure is [`Error::Backend`] with the client's error kept.
pub(crate) fn map_client_error(op: &str, queue: &QueueName, e: ClientError) -> Error {
    if let Some(msg) = &e.server_message {
        if let Some(what) = msg.strip_prefix("LEASEQ_CORRUPT ") {
            return Error::Corrupt {
                what: format!("queue {queue}: {what}"),
            };
        }
        if msg.contains("WRONGTYPE") {
            return Error::Corrupt {
                what: format!("queue {queue}: {op}: {msg}"),
            };
        }
    }
    Error::backend(format!("redis {op} on queue {queue}"), e)
}

/// Numbers and strings as script arguments.
pub(crate) fn arg(v: impl ToString) -> Bytes {
    Bytes::from(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_map_to_semantic_variants() {
        let q = QueueName::new("q").expect("valid");
        let io = ClientError::transport(std::io::Error::other("reset"));
        assert!(matches!(
            map_client_error("claim", &q, io),
            Error::Backend { .. }
        ));
        let corrupt = ClientError::server("LEASEQ_CORRUPT key x holds a list", "x");
        assert!(matches!(
            map_client_error("claim", &q, corrupt),
            Error::Corrupt { .. }
        ));
        let wrong = ClientError::server("WRONGTYPE Operation against a key", "x");
        assert!(matches!(
            map_client_error("ack", &q, wrong),
            Error::Corrupt { .. }
        ));
        let again = ClientError::server("TRYAGAIN Multiple keys request", "x");
        assert!(not_run(&again));
        assert!(!not_run(&ClientError::transport("reset")));
        let other = ClientError::server("ERR unknown", "x");
        assert!(!not_run(&other));
        let e = map_client_error("ack", &q, other);
        assert!(e.is_retryable());
    }
}
