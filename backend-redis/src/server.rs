//! The checks made at connect ([`crate::RedisBackend::verify_server`]): the
//! server's version, its eviction policy and its persistence, read on the
//! one server or on every master of a cluster; and the re-check of the
//! eviction policy while running ([`PolicyWatch`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use leaseq_core::{Error, QueueName, Result};

use crate::client::NodeReply;
use crate::{ClientError, RedisOptions, Reply, ScriptClient};

/// The oldest Redis the scripts run on: they carry Redis 7 script flags
/// (`#!lua flags=allow-oom`).
const MIN_MAJOR: u32 = 7;

/// What the checks found out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerFacts {
    /// Every node runs `appendonly yes` with `appendfsync always`, and has
    /// no replica or has writes wait for all of them, as far as could be
    /// read (a node whose settings could not be read is not).
    pub(crate) durable: bool,
    /// The eviction policies read, the start of the [`PolicyWatch`].
    pub(crate) seen: Seen,
}

/// One node's persistence settings, as far as they could be read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct NodeConfig {
    appendonly: Option<String>,
    appendfsync: Option<String>,
}

/// A node and its `maxmemory-policy`, or why it could not be read.
pub(crate) type NodePolicy = (String, std::result::Result<String, String>);

/// Each node's `CONFIG GET` reply (or its error), or why no node answered.
type Configs = std::result::Result<Vec<(String, std::result::Result<Reply, String>)>, String>;

/// `name`'s value in a `CONFIG GET` reply (name, value, name, value...).
fn config_value(reply: &Reply, name: &str) -> Option<String> {
    let items = reply.array().ok()?;
    items.chunks(2).find_map(|pair| match pair {
        [k, v] if k.text().ok()?.eq_ignore_ascii_case(name) => v.text().ok(),
        _ => None,
    })
}

/// The `redis_version` line of an `INFO server` reply.
fn version_of(reply: &Reply) -> Option<String> {
    let text = reply.text().ok()?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("redis_version:"))
        .map(str::to_owned)
}

/// The `maxmemory_policy` line of an `INFO memory` reply.
fn policy_of(reply: &Reply) -> Option<String> {
    let text = reply.text().ok()?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("maxmemory_policy:"))
        .map(|p| p.trim().to_owned())
}

fn major_of(version: &str) -> Option<u32> {
    version.split('.').next()?.parse().ok()
}

/// An evicting policy: anything but `noeviction`.
fn evicts(policy: &str) -> bool {
    !policy.eq_ignore_ascii_case("noeviction")
}

/// The nodes' replies, or why there are none.
async fn on_every_node<C: ScriptClient>(
    client: &C,
    args: &[&str],
) -> std::result::Result<Vec<NodeReply>, String> {
    match client.admin(args).await {
        Ok(nodes) if nodes.is_empty() => Err("no node answered".into()),
        Ok(nodes) => Ok(nodes),
        Err(e) => Err(e.to_string()),
    }
}

/// `CONFIG GET names...` on every node.
async fn config_get<C: ScriptClient>(client: &C, names: &[&str]) -> Configs {
    let mut args = vec!["CONFIG", "GET"];
    args.extend_from_slice(names);
    on_every_node(client, &args).await.map(|nodes| {
        nodes
            .into_iter()
            .map(|n| (n.node, n.reply.map_err(|e| e.to_string())))
            .collect()
    })
}

/// The policy in one node's `INFO memory` reply.
fn info_policy(
    reply: &std::result::Result<Reply, ClientError>,
) -> std::result::Result<String, String> {
    match reply {
        Ok(r) => policy_of(r).ok_or_else(|| "INFO memory named no maxmemory_policy".to_owned()),
        Err(e) => Err(format!("INFO memory: {e}")),
    }
}

/// Each node's `maxmemory-policy`: from its `CONFIG GET` reply in
/// `configs`, or where that failed or named none, from the
/// `maxmemory_policy` line of its `INFO memory` (managed servers often
/// rename or deny `CONFIG` and keep `INFO`). `INFO` is asked only when
/// some node needs it. `server` names the whole server when no node
/// answered either.
async fn policies<C: ScriptClient>(client: &C, server: &str, configs: &Configs) -> Vec<NodePolicy> {
    let read: Vec<NodePolicy> = match configs {
        Ok(nodes) => nodes
            .iter()
            .map(|(node, reply)| {
                let policy = match reply {
                    Ok(r) => config_value(r, "maxmemory-policy")
                        .ok_or_else(|| "CONFIG GET named no maxmemory-policy".to_owned()),
                    Err(e) => Err(format!("CONFIG GET: {e}")),
                };
                (node.clone(), policy)
            })
            .collect(),
        Err(e) => vec![(server.to_owned(), Err(format!("CONFIG GET: {e}")))],
    };
    if read.iter().all(|(_, p)| p.is_ok()) {
        return read;
    }
    match (configs, on_every_node(client, &["INFO", "memory"]).await) {
        // No node answered `CONFIG`: `INFO`'s nodes stand in.
        (Err(c), Ok(nodes)) => nodes
            .iter()
            .map(|n| {
                let policy = info_policy(&n.reply).map_err(|i| format!("CONFIG GET: {c}; {i}"));
                (n.node.clone(), policy)
            })
            .collect(),
        (_, Err(i)) => read
            .into_iter()
            .map(|(node, p)| (node, p.map_err(|c| format!("{c}; INFO memory: {i}"))))
            .collect(),
        (Ok(_), Ok(nodes)) => read
            .into_iter()
            .map(|(node, p)| {
                let p = p.or_else(|c| {
                    let info = nodes.iter().find(|n| n.node == node).map_or_else(
                        || Err("INFO memory: the node did not answer".to_owned()),
                        |n| info_policy(&n.reply),
                    );
                    info.map_err(|i| format!("{c}; {i}"))
                });
                (node, p)
            })
            .collect(),
    }
}

/// Each node's `maxmemory-policy`, read again ([`PolicyWatch`]).
pub(crate) async fn read_policies<C: ScriptClient>(client: &C, server: &str) -> Vec<NodePolicy> {
    let configs = config_get(client, &["maxmemory-policy"]).await;
    policies(client, server, &configs).await
}

/// Reads the server's settings and judges them against `config`: refuses
/// a server older than Redis 7 ([`Error::Unsupported`]) and an evicting
/// `maxmemory-policy` unless [`RedisOptions::allow_eviction`]
/// ([`Error::InvalidInput`]); works out whether the server is durable.
/// Settings that cannot be read (`CONFIG` disabled, renamed or denied by
/// an ACL) are logged as warnings and the checks go on; the policy is then
/// read from `INFO memory` where that is allowed.
pub(crate) async fn inspect<C: ScriptClient>(
    client: &C,
    config: &RedisOptions,
) -> Result<ServerFacts> {
    let shown = config.shown_url();
    let server = shown.as_str();
    match on_every_node(client, &["INFO", "server"]).await {
        Ok(nodes) => {
            for n in nodes {
                let version = n.reply.as_ref().ok().and_then(version_of);
                match version.as_deref().and_then(|v| major_of(v).map(|m| (v, m))) {
                    Some((v, major)) if major < MIN_MAJOR => {
                        return Err(Error::unsupported(format!(
                            "{server}: node {} runs Redis {v}; leaseq-redis needs Redis {MIN_MAJOR}.0 or later (its scripts carry script flags)",
                            n.node
                        )))
                    }
                    Some(_) => {}
                    None => tracing::warn!(server, node = %n.node,
                        "leaseq-redis: could not read the server's version (INFO server); Redis 7.0 or later is needed"),
                }
            }
        }
        Err(e) => tracing::warn!(server, error = %e,
            "leaseq-redis: could not read the server's version (INFO server); Redis 7.0 or later is needed"),
    }

    let configs = config_get(client, &["maxmemory-policy", "appendonly", "appendfsync"]).await;
    let read = policies(client, server, &configs).await;
    for (node, policy) in &read {
        match policy {
            Ok(p) if evicts(p) && !config.allow_eviction => {
                return Err(Error::invalid(format!(
                    "{server}: node {node} runs maxmemory-policy {p}, which deletes keys when memory is full \
                     (items, indexes and the id counter would vanish: items lost or delivered twice); \
                     set `maxmemory-policy noeviction`, or accept the risk with RedisOptions::allow_eviction(true)"
                )))
            }
            Ok(p) if evicts(p) => tracing::warn!(server, node = %node, policy = %p,
                "leaseq-redis: EVICTING maxmemory-policy accepted (allow_eviction): when the server is full it \
                 deletes keys, and items can be LOST or DELIVERED TWICE; use noeviction"),
            Ok(_) => {}
            Err(e) => tracing::warn!(server, node = %node, error = %e,
                "leaseq-redis: could not read the node's maxmemory-policy (CONFIG GET and INFO memory \
                 disabled, renamed or denied?): cannot check that it is noeviction"),
        }
    }

    let nodes: Vec<(String, std::result::Result<NodeConfig, String>)> = match configs {
        Ok(nodes) => nodes
            .into_iter()
            .map(|(node, reply)| {
                let settings = reply.map(|r| NodeConfig {
                    appendonly: config_value(&r, "appendonly"),
                    appendfsync: config_value(&r, "appendfsync"),
                });
                (node, settings)
            })
            .collect(),
        Err(e) => vec![(server.to_owned(), Err(e))],
    };
    let mut durable = true;
    for (node, read) in &nodes {
        let settings = match read {
            Ok(s) => s.clone(),
            Err(e) => {
                tracing::warn!(server, node = %node, error = %e,
                    "leaseq-redis: could not read the server's persistence settings (CONFIG GET disabled, \
                     renamed or denied?): reporting the backend not durable");
                NodeConfig::default()
            }
        };
        let node_durable = settings
            .appendonly
            .as_deref()
            .is_some_and(|v| v.eq_ignore_ascii_case("yes"))
            && settings
                .appendfsync
                .as_deref()
                .is_some_and(|v| v.eq_ignore_ascii_case("always"));
        durable &= node_durable;
    }
    durable &= replicas_covered(client, config).await;
    match config.durable {
        Some(false) => durable = false,
        Some(true) if !durable => tracing::warn!(server,
            "leaseq-redis: RedisOptions::durable(true) is set, but the server does not run (or could not be \
             checked to run) appendonly yes with appendfsync always on every master: reporting not durable"),
        _ => {}
    }
    Ok(ServerFacts {
        durable,
        seen: Seen::of(&read),
    })
}

/// What one read of the eviction policies found, as the watch keeps it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    /// The nodes that run an evicting policy, each with its policy.
    evicting: Vec<(String, String)>,
    /// Some node's policy could not be read.
    unread: bool,
}

impl Seen {
    fn of(read: &[NodePolicy]) -> Self {
        Seen {
            evicting: read
                .iter()
                .filter_map(|(node, p)| match p {
                    Ok(p) if evicts(p) => Some((node.clone(), p.clone())),
                    _ => None,
                })
                .collect(),
            unread: read.iter().any(|(_, p)| p.is_err()),
        }
    }

    /// "node a runs allkeys-lru, node b runs volatile-ttl".
    fn named(&self) -> String {
        let runs: Vec<String> = self
            .evicting
            .iter()
            .map(|(node, p)| format!("node {node} runs maxmemory-policy {p}"))
            .collect();
        runs.join(", ")
    }
}

/// The eviction policy, re-read while the backend runs: connect checks it
/// once, but `CONFIG SET maxmemory-policy allkeys-lru` on a running server
/// would then evict items silently. The reaper reads it again at most once
/// per [`RedisOptions::policy_check_interval`] ([`PolicyWatch::due`]);
/// while a node runs an evicting policy and eviction is not allowed,
/// writes that add items are refused ([`PolicyWatch::refusal`]). Shared by
/// a backend's clones.
#[derive(Debug)]
pub(crate) struct PolicyWatch {
    every: Duration,
    allow: bool,
    /// The server as logs show it (password masked).
    server: String,
    /// The origin of `last`.
    start: Instant,
    /// When the last read began, in ms after `start`.
    last: AtomicU64,
    /// Writes that add items are refused (a copy of what `seen` says, read
    /// without the lock on every enqueue).
    refusing: AtomicBool,
    seen: Mutex<Seen>,
}

impl PolicyWatch {
    /// A watch that starts from what connect read (`seen`), so a policy
    /// connect already warned about is not logged again.
    pub(crate) fn new(config: &RedisOptions, seen: Seen) -> Self {
        PolicyWatch {
            every: config.policy_check,
            allow: config.allow_eviction,
            server: config.shown_url(),
            start: Instant::now(),
            last: AtomicU64::new(0),
            refusing: AtomicBool::new(false),
            seen: Mutex::new(seen),
        }
    }

    /// The server as logs show it.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// True when a read is due (the last one began `every` ago or more):
    /// the caller that gets `true` makes it, and callers racing it get
    /// `false`, so the interval costs one read whatever the number of
    /// clones and reapers.
    pub(crate) fn due(&self) -> bool {
        let now = self.now_ms();
        let last = self.last.load(Ordering::Acquire);
        let every = u64::try_from(self.every.as_millis()).unwrap_or(u64::MAX);
        now.saturating_sub(last) >= every
            && self
                .last
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }

    /// Whether writes that add items are refused.
    pub(crate) fn refusing(&self) -> bool {
        self.refusing.load(Ordering::Acquire)
    }

    /// Judges a read: starts or lifts the refusal, and logs what changed.
    /// A read that reached no node changes nothing (warned once).
    pub(crate) fn saw(&self, read: &[NodePolicy]) {
        let server = self.server.as_str();
        let now = Seen::of(read);
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if now.unread && !seen.unread {
            for (node, e) in read
                .iter()
                .filter_map(|(n, p)| p.as_ref().err().map(|e| (n, e)))
            {
                tracing::warn!(server, node = %node, error = %e,
                    "leaseq-redis: could not read the node's maxmemory-policy again (CONFIG GET and INFO \
                     memory disabled, renamed or denied?): cannot check that it is still noeviction");
            }
        }
        if read.iter().all(|(_, p)| p.is_err()) {
            seen.unread = true;
            return;
        }
        let was = std::mem::replace(&mut *seen, now);
        let changed = was.evicting != seen.evicting;
        if !seen.evicting.is_empty() && !self.allow {
            if changed || !self.refusing() {
                for (node, policy) in &seen.evicting {
                    tracing::error!(server, node = %node, policy = %policy,
                        "leaseq-redis: maxmemory-policy is now EVICTING: when the server is full it deletes keys, \
                         and items are LOST or DELIVERED TWICE; enqueues are REFUSED until it is noeviction \
                         again (leases keep working): run `CONFIG SET maxmemory-policy noeviction` on the node \
                         (or accept the risk with RedisOptions::allow_eviction(true))");
                }
            }
            self.refusing.store(true, Ordering::Release);
        } else if !seen.evicting.is_empty() {
            if changed {
                for (node, policy) in &seen.evicting {
                    tracing::warn!(server, node = %node, policy = %policy,
                        "leaseq-redis: maxmemory-policy is now EVICTING, accepted (allow_eviction): when the \
                         server is full it deletes keys, and items can be LOST or DELIVERED TWICE; use noeviction");
                }
            }
        } else if self.refusing.swap(false, Ordering::AcqRel) {
            tracing::info!(server,
                "leaseq-redis: maxmemory-policy is noeviction again on every node: enqueues are accepted again");
        } else if changed {
            tracing::info!(
                server,
                "leaseq-redis: maxmemory-policy is noeviction again on every node"
            );
        }
    }

    /// The error for a write that adds items (`op` on `queue`) while
    /// refused, else `None`.
    ///
    /// It is [`Error::Unavailable`]: nothing was written, and the same call
    /// succeeds once the policy is `noeviction` again and a read sees it,
    /// with no change by the caller, which is what a retryable error that
    /// applied nothing says ([`Error::is_retryable`], not
    /// [`Error::may_have_applied`]), so workers, `settle` and schedulers
    /// try again later. [`Error::InvalidInput`] (what connect answers) and
    /// [`Error::Rejected`] would tell them to give up on a call that is
    /// fine; [`Error::Full`] would blame memory.
    pub(crate) fn refusal(&self, op: &str, queue: &QueueName) -> Option<Error> {
        if !self.refusing() {
            return None;
        }
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if !self.refusing() {
            return None;
        }
        Some(Error::unavailable(
            format!(
                "redis {op} on queue {queue} refused, nothing was written: {}, which deletes keys when \
                 memory is full (items lost or delivered twice); set `maxmemory-policy noeviction` \
                 (enqueues resume at the next check, every {:?}), or accept the risk with \
                 RedisOptions::allow_eviction(true)",
                seen.named(),
                self.every
            ),
            "an evicting maxmemory-policy",
        ))
    }
}

/// The `connected_slaves` line of an `INFO replication` reply.
fn replicas_of(reply: &Reply) -> Option<u32> {
    let text = reply.text().ok()?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Whether a forced failover keeps every acknowledged write, as far as
/// replicas go: a node with `replicas` connected replicas is covered when
/// it has none, or when each write waits for all of them (`wait`), so any
/// replica promoted holds every write reported done.
fn covered(replicas: u32, wait: Option<crate::ReplicaWait>) -> bool {
    replicas == 0 || wait.is_some_and(|w| w.replicas() >= replicas)
}

/// Reads `INFO replication` on every master and judges it with
/// [`covered`]; warns when writes wait for more replicas than a node has
/// (they would all fail until the replicas connect). A node that cannot be
/// read is not covered.
async fn replicas_covered<C: ScriptClient>(client: &C, config: &RedisOptions) -> bool {
    let shown = config.shown_url();
    let server = shown.as_str();
    let wait = config.replica_wait;
    let nodes = match on_every_node(client, &["INFO", "replication"]).await {
        Ok(nodes) => nodes,
        Err(e) => {
            tracing::warn!(server, error = %e,
                "leaseq-redis: could not read the replicas (INFO replication); reporting not durable");
            return false;
        }
    };
    let mut all = true;
    for n in nodes {
        let Some(replicas) = n.reply.as_ref().ok().and_then(replicas_of) else {
            tracing::warn!(server, node = %n.node,
                "leaseq-redis: could not read the node's replicas (INFO replication); reporting not durable");
            all = false;
            continue;
        };
        if let Some(w) = wait.filter(|w| w.replicas() > replicas) {
            tracing::warn!(server, node = %n.node, replicas, wanted = w.replicas(),
                "leaseq-redis: writes wait for more replicas than the node has connected: \
                 they fail (as maybe applied) until enough replicas connect");
        }
        all &= covered(replicas, wait);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn d(s: &str) -> Reply {
        Reply::Data(Bytes::from(s.to_owned()))
    }

    #[test]
    fn config_and_info_replies_parse() {
        let r = Reply::Array(vec![
            d("appendonly"),
            d("yes"),
            d("maxmemory-policy"),
            d("allkeys-lru"),
        ]);
        assert_eq!(config_value(&r, "appendonly").as_deref(), Some("yes"));
        assert_eq!(
            config_value(&r, "maxmemory-policy").as_deref(),
            Some("allkeys-lru")
        );
        assert_eq!(config_value(&r, "appendfsync"), None);
        assert_eq!(config_value(&d("junk"), "appendfsync"), None);
        let info = d("# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n");
        assert_eq!(version_of(&info).as_deref(), Some("7.0.15"));
        assert_eq!(major_of("7.0.15"), Some(7));
        assert_eq!(major_of("6.2.1"), Some(6));
        assert!(evicts("allkeys-lru") && evicts("volatile-ttl") && !evicts("noeviction"));
        let info = d("# Memory\r\nused_memory:1\r\nmaxmemory_policy:allkeys-lru\r\n");
        assert_eq!(policy_of(&info).as_deref(), Some("allkeys-lru"));
        assert_eq!(policy_of(&d("used_memory:1")), None);
        let info = d("# Replication\r\nrole:master\r\nconnected_slaves:2\r\n");
        assert_eq!(replicas_of(&info), Some(2));
        assert_eq!(replicas_of(&d("role:master")), None);
    }

    #[test]
    fn a_failover_keeps_acknowledged_writes_only_when_writes_wait_for_every_replica() {
        let wait = |n| {
            RedisOptions::new("redis://h:1")
                .wait_for_replicas(n, std::time::Duration::from_millis(100))
                .replica_wait()
        };
        assert!(covered(0, None));
        assert!(!covered(1, None));
        assert!(covered(1, wait(1)));
        assert!(!covered(2, wait(1)));
        assert!(covered(2, wait(2)));
    }

    fn watch(allow: bool, every: Duration) -> PolicyWatch {
        let config = RedisOptions::new("redis://h:1")
            .allow_eviction(allow)
            .policy_check_interval(every);
        PolicyWatch::new(&config, Seen::default())
    }

    fn read(policies: &[&str]) -> Vec<NodePolicy> {
        policies
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("n{i}"), Ok((*p).to_owned())))
            .collect()
    }

    #[test]
    fn a_read_is_due_once_per_interval_whoever_asks() {
        assert!(watch(false, Duration::ZERO).due(), "zero: every time");
        let w = watch(false, Duration::from_secs(3600));
        assert!(!w.due(), "connect has just read it");
        let Some(then) = Instant::now().checked_sub(Duration::from_secs(3601)) else {
            return;
        };
        let w = PolicyWatch { start: then, ..w };
        assert!(w.due());
        assert!(!w.due(), "one caller per interval");
    }

    #[test]
    fn an_evicting_policy_refuses_item_writes_until_noeviction_is_read() {
        let q = QueueName::new("q").expect("valid");
        let w = watch(false, Duration::from_secs(10));
        w.saw(&read(&["noeviction", "noeviction"]));
        assert!(w.refusal("enqueue", &q).is_none());
        w.saw(&read(&["noeviction", "allkeys-lru"]));
        let e = w.refusal("enqueue", &q).expect("refused");
        assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
        assert!(e.is_retryable() && !e.may_have_applied());
        let text = e.to_string();
        for words in [
            "node n1",
            "allkeys-lru",
            "noeviction",
            "allow_eviction",
            "queue q",
        ] {
            assert!(text.contains(words), "{text}");
        }
        // A read that reaches no node changes nothing.
        w.saw(&[("h".into(), Err("NOPERM".into()))]);
        assert!(w.refusing());
        // A node that cannot be read does not hide one that evicts.
        w.saw(&[
            ("n0".into(), Err("NOPERM".into())),
            ("n1".into(), Ok("volatile-ttl".into())),
        ]);
        assert!(w
            .refusal("enqueue_once", &q)
            .is_some_and(|e| e.to_string().contains("volatile-ttl")));
        w.saw(&read(&["noeviction", "NOEVICTION"]));
        assert!(!w.refusing() && w.refusal("enqueue", &q).is_none());
    }

    #[test]
    fn allowed_eviction_refuses_nothing() {
        let q = QueueName::new("q").expect("valid");
        let w = watch(true, Duration::from_secs(10));
        w.saw(&read(&["allkeys-lru"]));
        assert!(!w.refusing() && w.refusal("enqueue", &q).is_none());
    }
}
