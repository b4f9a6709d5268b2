//! The backend: a client adapter plus the shared scripts and key layout.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use leaseq_core::testing::StepCounter;
use leaseq_core::{Error, ItemId, QueueName, Result};

use crate::scripts::Scripts;
use crate::server::PolicyWatch;
use crate::{ClientError, KeyLayout, RedisOptions, Reply, Script, ScriptClient};

/// The Redis backend over any [`ScriptClient`]; see the crate docs for the
/// layout and the scripts. Cloning is cheap and clones share the client.
pub struct RedisBackend<C: ScriptClient> {
    pub(crate) client: Arc<C>,
    pub(crate) config: Arc<RedisOptions>,
    pub(crate) scripts: Arc<Scripts>,
    /// Scripts run per queue, counted only with test hooks on.
    pub(crate) steps: Arc<StepCounter>,
    /// The highest id this handle has seen per queue (see [`IdFloors`]).
    pub(crate) floors: Arc<IdFloors>,
    /// What [`RedisBackend::verify_server`] found: every node persists each
    /// write before answering.
    pub(crate) durable: bool,
    /// The eviction policy re-read while running; set by
    /// [`RedisBackend::verify_server`] (a backend built on a client alone
    /// checks nothing).
    pub(crate) policy: Option<Arc<PolicyWatch>>,
    /// The workers' cancel signals, fed from each queue's cancel stream
    /// (see `cancel_feed.rs`).
    pub(crate) cancels: Arc<leaseq_core::signal::SignalHub>,
    /// The finished signals, fed from each queue's `ends` stream (see
    /// `cancel_feed.rs`).
    pub(crate) finishes: Arc<leaseq_core::signal::SignalHub>,
    /// Job events, fed from each followed queue's `events` stream (see
    /// `events.rs`).
    pub(crate) events: Arc<crate::events::EventFeeds>,
}

/// The highest item id a backend handle has seen per queue (handed out by
/// its enqueues, or leased by its claims). Each enqueue sends it along: a
/// server that came back from an older snapshot has taken its id counter
/// back, and the script re-seeds the counter past this floor, so the handle
/// never sees one id given to two items. Best effort and bounded: at most
/// [`IdFloors::CAP`] queues are remembered (the map starts over when full).
#[derive(Debug, Default)]
pub(crate) struct IdFloors {
    seen: Mutex<HashMap<String, u64>>,
}

impl IdFloors {
    /// The most queues remembered.
    pub(crate) const CAP: usize = 65_536;

    /// The floor of `queue` (0: nothing seen).
    pub(crate) fn get(&self, queue: &QueueName) -> u64 {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.get(queue.as_str()).copied().unwrap_or(0)
    }

    /// Records ids seen in `queue`.
    pub(crate) fn saw(&self, queue: &QueueName, ids: impl IntoIterator<Item = ItemId>) {
        let Some(top) = ids.into_iter().map(ItemId::get).max() else {
            return;
        };
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(floor) = seen.get_mut(queue.as_str()) {
            *floor = (*floor).max(top);
            return;
        }
        if seen.len() >= Self::CAP {
            seen.clear();
        }
        seen.insert(queue.as_str().to_owned(), top);
    }
}

impl<C: ScriptClient> Clone for RedisBackend<C> {
    fn clone(&self) -> Self {
        RedisBackend {
            client: Arc::clone(&self.client),
            config: Arc::clone(&self.config),
            scripts: Arc::clone(&self.scripts),
            steps: Arc::clone(&self.steps),
            floors: Arc::clone(&self.floors),
            durable: self.durable,
            policy: self.policy.clone(),
            cancels: Arc::clone(&self.cancels),
            finishes: Arc::clone(&self.finishes),
            events: Arc::clone(&self.events),
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
    /// A backend over an already connected client adapter. It checks no
    /// server setting and reports the backend not durable: call
    /// [`RedisBackend::verify_server`] (as `connect` does) for both.
    pub fn with_client(client: C, config: RedisOptions) -> Result<Self> {
        config.check()?;
        Ok(RedisBackend {
            steps: Arc::new(StepCounter::new(config.test_hooks)),
            client: Arc::new(client),
            config: Arc::new(config),
            scripts: Arc::new(Scripts::new()),
            floors: Arc::new(IdFloors::default()),
            durable: false,
            policy: None,
            cancels: Arc::default(),
            finishes: Arc::default(),
            events: Arc::default(),
        })
    }

    /// The checks `connect` makes, through [`ScriptClient::admin`], on the
    /// one server or every master of a cluster:
    /// - Redis 7.0 or later (the scripts carry script flags), else
    ///   [`Error::Unsupported`];
    /// - `maxmemory-policy noeviction`: any evicting policy is refused with
    ///   [`Error::InvalidInput`] unless [`RedisOptions::allow_eviction`]
    ///   (then a warning is logged);
    /// - durability: [`leaseq_core::Capabilities::durable`] is reported
    ///   only when every node runs `appendonly yes` with `appendfsync
    ///   always` (and [`RedisOptions::durable`] is not `false`).
    ///
    /// A server where `CONFIG` is disabled, renamed or denied is accepted
    /// with a warning (and reported not durable); the policy is then read
    /// from `INFO memory`, and where that is denied too it goes unchecked
    /// (with a warning).
    ///
    /// The policy is read again while the backend runs: the reaper
    /// ([`leaseq_core::Backend::reap`]) reads it at most once per
    /// [`RedisOptions::policy_check_interval`] (10 s by default). When a
    /// node has turned to an evicting policy and
    /// [`RedisOptions::allow_eviction`] is off, an error is logged and the
    /// writes that add items (enqueue, `enqueue_once`, a schedule's fire)
    /// are refused with [`Error::Unavailable`], writing nothing, while
    /// claims, acks, extends, releases, fails and reaps go on so consumers
    /// drain the backlog; once a read finds `noeviction` again the refusal
    /// lifts (logged). With `allow_eviction(true)` a changed policy is
    /// logged as a warning and nothing is refused. A read that fails
    /// changes nothing (warned once).
    pub async fn verify_server(mut self) -> Result<Self> {
        let facts = crate::server::inspect(self.client.as_ref(), &self.config).await?;
        self.durable = facts.durable;
        self.policy = Some(Arc::new(PolicyWatch::new(&self.config, facts.seen)));
        Ok(self)
    }

    /// Reads `maxmemory-policy` again when a read is due (see
    /// [`RedisBackend::verify_server`]); never fails: a read that errs or
    /// takes longer than the response timeout changes nothing.
    pub(crate) async fn check_policy(&self) {
        let Some(watch) = &self.policy else {
            return;
        };
        if !watch.due() {
            return;
        }
        let reading = crate::server::read_policies(self.client.as_ref(), watch.server());
        match tokio::time::timeout(self.config.response_timeout, reading).await {
            Ok(read) => watch.saw(&read),
            Err(_) => watch.saw(&[(
                watch.server().to_owned(),
                Err(format!(
                    "no reply within {:?}",
                    self.config.response_timeout
                )),
            )]),
        }
    }

    /// Refuses a write that adds items (`op` on `queue`) while a node runs
    /// an evicting policy (see [`RedisBackend::verify_server`]). While
    /// refused it makes a due read itself, so the refusal lifts in a
    /// process whose reaper stopped.
    pub(crate) async fn may_add_items(&self, op: &str, queue: &QueueName) -> Result<()> {
        let Some(watch) = &self.policy else {
            return Ok(());
        };
        if !watch.refusing() {
            return Ok(());
        }
        self.check_policy().await;
        watch.refusal(op, queue).map_or(Ok(()), Err)
    }

    /// The client adapter.
    pub fn client(&self) -> &C {
        &self.client
    }

    /// The settings.
    pub fn options(&self) -> &RedisOptions {
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
        self.run_with_keys(script, queue, Vec::new(), args).await
    }

    /// [`RedisBackend::run`] with `extra` keys declared after the queue's
    /// own (`KEYS[2]` on); each must carry the queue's hash tag, so the
    /// script still touches one slot.
    pub(crate) async fn run_with_keys(
        &self,
        script: &Script,
        queue: &QueueName,
        extra: Vec<String>,
        args: Vec<Bytes>,
    ) -> Result<Reply> {
        let keys = self.keys(queue)?;
        if let Some(k) = extra.iter().find(|k| !k.starts_with(keys.tag())) {
            return Err(Error::invalid(format!(
                "key {k:?} is outside the hash tag of queue {queue}"
            )));
        }
        self.steps.count(queue);
        let mut full = Vec::with_capacity(args.len() + 1);
        full.push(Bytes::from(keys.key_prefix()));
        full.extend(args);
        let mut script_keys = keys.script_keys();
        script_keys.extend(extra);
        let deadline = tokio::time::Instant::now() + self.config.response_timeout;
        let mut pause = Duration::from_millis(2);
        loop {
            let ran = match self
                .config
                .replica_wait
                .filter(|_| crate::replicas::waits(script))
            {
                None => self.client.eval(script, &script_keys, &full).await.map(Ok),
                Some(w) => self
                    .client
                    .eval_wait(script, &script_keys, &full, w.replicas(), w.timeout_ms())
                    .await
                    .map(|(reply, acked)| {
                        crate::replicas::judge(script.name(), queue, w, reply, acked)
                    }),
            };
            match ran {
                Ok(judged) => return judged,
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

/// The first word of a server error line: its code (`"MOVED"`, `"OOM"`).
fn error_code(msg: &str) -> &str {
    msg.split_ascii_whitespace().next().unwrap_or("")
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
/// [`RedisBackend::run`] sends these again for up to the response timeout.
/// Connection failures and timeouts are never retried here: the script may
/// have run, and sending it again could apply it twice.
pub(crate) fn not_run(e: &ClientError) -> bool {
    let Some(msg) = &e.server_message else {
        return false;
    };
    matches!(
        error_code(msg),
        "TRYAGAIN" | "MOVED" | "ASK" | "CLUSTERDOWN"
    )
}

/// Failures that prove the script did not run (so nothing was applied),
/// reported as [`Error::Unavailable`] (`OOM` as [`Error::Full`]):
/// - the command never reached a server ([`ClientError::unsent`]: the
///   connection was refused, no node served the slot, or the client failed
///   it before writing it);
/// - the [`not_run`] replies, once [`RedisBackend::run`] stopped sending
///   the script again;
/// - server refusals: `OOM` (over `maxmemory`, the server refuses a script
///   that carries no `allow-oom` flag at its first write, and only its
///   first: the enqueues, whose first write comes before any item),
///   `LOADING` (the dataset is
///   still loading), `BUSY` (another script is running), `MASTERDOWN` (a
///   replica that lost its master), `READONLY` (a replica; its first write
///   is refused and it has made none), `NOSCRIPT` (the script is unknown
///   even after `EVAL`), `MISCONF` and `NOREPLICAS` (writes refused while
///   the last save failed or too few replicas are in sync: a state that
///   cannot change while a script runs, so its first write was refused).
///
/// Everything else (timeouts, dropped connections, I/O errors after the
/// command was written, script runtime errors) may have been applied.
pub(crate) fn refused_before_run(e: &ClientError) -> bool {
    if e.unsent || not_run(e) {
        return true;
    }
    let Some(msg) = &e.server_message else {
        return false;
    };
    matches!(
        error_code(msg),
        "OOM"
            | "LOADING"
            | "BUSY"
            | "MASTERDOWN"
            | "READONLY"
            | "NOSCRIPT"
            | "MISCONF"
            | "NOREPLICAS"
    )
}

/// Server replies that name corrupt data become [`Error::Corrupt`]; `OOM`
/// (a server at `maxmemory` refused the script's first write, so it wrote
/// nothing) becomes [`Error::Full`]; other failures that prove nothing ran
/// ([`refused_before_run`]) become [`Error::Unavailable`]; every other
/// failure is [`Error::OutcomeUnknown`] (the outcome is unknown). The client's
/// error is kept as the source.
pub(crate) fn map_client_error(op: &str, queue: &QueueName, e: ClientError) -> Error {
    if let Some(msg) = &e.server_message {
        if let Some(what) = msg.strip_prefix("LEASEQ_CORRUPT ") {
            return Error::Corrupt {
                what: format!("queue {queue}: {what}"),
            };
        }
        if error_code(msg) == "OOM" {
            return Error::full(
                format!("redis {op} on queue {queue}: the server is at its maxmemory limit, nothing was written"),
                e,
            );
        }
        if msg.contains("WRONGTYPE") {
            return Error::Corrupt {
                what: format!("queue {queue}: {op}: {msg}"),
            };
        }
    }
    if rejected(&e) {
        return Error::rejected(format!("redis {op} on queue {queue}"), e);
    }
    if refused_before_run(&e) {
        return Error::unavailable(format!("redis {op} on queue {queue}"), e);
    }
    Error::outcome_unknown(format!("redis {op} on queue {queue}"), e)
}

/// Server replies that the same call meets again until someone acts:
/// `NOPERM` (an ACL denies a command or key), `NOAUTH` / `WRONGPASS`, an
/// unknown command (a server too old), and a script that failed at run
/// time (`ERR user_script:…` on Redis 7, `ERR Error running script` on
/// older servers: a bug, or data no check foresaw). ACL and unknown-command
/// refusals come before the command runs; a script stopped by an error
/// keeps the writes made before it, and every script reads and checks
/// before its first write.
pub(crate) fn rejected(e: &ClientError) -> bool {
    let Some(msg) = &e.server_message else {
        return false;
    };
    matches!(error_code(msg), "NOPERM" | "NOAUTH" | "WRONGPASS")
        || msg.starts_with("ERR user_script:")
        || msg.starts_with("ERR Error running script")
        || msg.starts_with("ERR unknown command")
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
            Error::OutcomeUnknown { .. }
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
        assert!(e.may_have_applied(), "{e:?}");
    }

    #[test]
    fn refusals_a_resend_cannot_change_are_rejections() {
        let q = QueueName::new("q").expect("valid");
        for line in [
            "ERR user_script:3: attempt to compare nil with number script: 1f0e",
            "ERR Error running script (call to f_1f0e): @user_script:3: ...",
            "NOPERM this user has no permissions to run the 'evalsha' command",
            "NOAUTH Authentication required.",
            "WRONGPASS invalid username-password pair or user is disabled.",
            "ERR unknown command 'FCALL', with args beginning with:",
        ] {
            let e = map_client_error("claim", &q, ClientError::server(line, "x"));
            assert!(matches!(e, Error::Rejected { .. }), "{line}: {e:?}");
            assert!(!e.is_retryable() && !e.may_have_applied(), "{line}");
        }
        for line in ["ERR unknown", "BUSY Redis is busy running a script."] {
            let e = map_client_error("claim", &q, ClientError::server(line, "x"));
            assert!(!matches!(e, Error::Rejected { .. }), "{line}: {e:?}");
        }
    }

    #[test]
    fn refusals_are_unavailable_and_unknown_outcomes_are_backend() {
        let q = QueueName::new("q").expect("valid");
        let unavailable =
            |e: ClientError| matches!(map_client_error("claim", &q, e), Error::Unavailable { .. });
        let full = map_client_error(
            "enqueue",
            &q,
            ClientError::server(
                "OOM command not allowed when used memory > 'maxmemory'. script: 1f0e, on @user_script:90.",
                "x",
            ),
        );
        assert!(matches!(full, Error::Full { .. }), "{full:?}");
        assert!(full.is_retryable() && !full.may_have_applied());
        for line in [
            "LOADING Redis is loading the dataset in memory",
            "BUSY Redis is busy running a script.",
            "MASTERDOWN Link with MASTER is down",
            "READONLY You can't write against a read only replica.",
            "NOSCRIPT No matching script.",
            "MISCONF Redis is configured to save RDB snapshots",
            "NOREPLICAS Not enough good replicas to write.",
            "MOVED 3999 127.0.0.1:6381",
            "ASK 3999 127.0.0.1:6381",
            "TRYAGAIN Multiple keys request during rehashing of slot",
            "CLUSTERDOWN The cluster is down",
        ] {
            assert!(unavailable(ClientError::server(line, "x")), "{line}");
        }
        assert!(unavailable(ClientError::unsent("connection refused")));
        for line in [
            "ERR user_script:3: attempt to compare nil with number",
            "BUSYKEY Target key name already exists.",
            "NOPERM this user has no permissions",
        ] {
            assert!(!unavailable(ClientError::server(line, "x")), "{line}");
        }
        let e = map_client_error(
            "ack",
            &q,
            ClientError::transport(std::io::Error::from(std::io::ErrorKind::TimedOut)),
        );
        assert!(matches!(e, Error::OutcomeUnknown { .. }), "{e:?}");
        assert!(e.may_have_applied());
    }
}
