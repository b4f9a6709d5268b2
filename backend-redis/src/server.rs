//! The checks made at connect ([`crate::RedisBackend::verify_server`]): the
//! server's version, its eviction policy and its persistence, read on the
//! one server or on every master of a cluster.

use leaseq_core::{Error, Result};

use crate::client::NodeReply;
use crate::{RedisOptions, Reply, ScriptClient};

/// The oldest Redis the scripts run on: they carry Redis 7 script flags
/// (`#!lua flags=allow-oom`).
const MIN_MAJOR: u32 = 7;

/// What the checks found out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ServerFacts {
    /// Every node runs `appendonly yes` with `appendfsync always`, and has
    /// no replica or has writes wait for all of them, as far as could be
    /// read (a node whose settings could not be read is not).
    pub(crate) durable: bool,
}

/// One node's settings, as far as they could be read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct NodeConfig {
    policy: Option<String>,
    appendonly: Option<String>,
    appendfsync: Option<String>,
}

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

/// Reads the server's settings and judges them against `config`: refuses
/// a server older than Redis 7 ([`Error::Unsupported`]) and an evicting
/// `maxmemory-policy` unless [`RedisOptions::allow_eviction`]
/// ([`Error::InvalidInput`]); works out whether the server is durable.
/// Settings that cannot be read (`CONFIG` disabled, renamed or denied by
/// an ACL) are logged as warnings and the checks go on.
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

    let nodes: Vec<(String, std::result::Result<NodeConfig, String>)> = match on_every_node(
        client,
        &[
            "CONFIG",
            "GET",
            "maxmemory-policy",
            "appendonly",
            "appendfsync",
        ],
    )
    .await
    {
        Ok(nodes) => nodes
            .into_iter()
            .map(|n| {
                let read = n.reply.map_err(|e| e.to_string()).map(|r| NodeConfig {
                    policy: config_value(&r, "maxmemory-policy"),
                    appendonly: config_value(&r, "appendonly"),
                    appendfsync: config_value(&r, "appendfsync"),
                });
                (n.node, read)
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
                    "leaseq-redis: could not read the server's settings (CONFIG GET disabled, renamed or denied?): \
                     cannot check that maxmemory-policy is noeviction; reporting the backend not durable");
                NodeConfig::default()
            }
        };
        match settings.policy.as_deref() {
            Some(p) if evicts(p) && !config.allow_eviction => {
                return Err(Error::invalid(format!(
                    "{server}: node {node} runs maxmemory-policy {p}, which deletes keys when memory is full \
                     (items, indexes and the id counter would vanish: items lost or delivered twice); \
                     set `maxmemory-policy noeviction`, or accept the risk with RedisOptions::allow_eviction(true)"
                )))
            }
            Some(p) if evicts(p) => tracing::warn!(server, node = %node, policy = p,
                "leaseq-redis: EVICTING maxmemory-policy accepted (allow_eviction): when the server is full it \
                 deletes keys, and items can be LOST or DELIVERED TWICE; use noeviction"),
            Some(_) => {}
            None if read.is_ok() => tracing::warn!(server, node = %node,
                "leaseq-redis: the server did not name its maxmemory-policy; it must be noeviction"),
            None => {}
        }
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
    Ok(ServerFacts { durable })
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
        let info = d("# Replication\r\nrole:master\r\nconnected_slaves:2\r\n");
        assert_eq!(replicas_of(&info), Some(2));
        assert_eq!(replicas_of(&d("role:master")), None);
    }

    #[test]
    fn a_failover_keeps_acknowledged_writes_only_when_writes_wait_for_every_replica() {
        let wait = |n| {
            RedisOptions::new("redis://h:1")
                .wait_for_replicas(n, std::time::Duration::from_millis(100))
                .get_wait_for_replicas()
        };
        assert!(covered(0, None));
        assert!(!covered(1, None));
        assert!(covered(1, wait(1)));
        assert!(!covered(2, wait(1)));
        assert!(covered(2, wait(2)));
    }
}
