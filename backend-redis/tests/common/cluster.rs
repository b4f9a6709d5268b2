//! A private 3-master Redis Cluster on loopback: three `redis-server
//! --cluster-enabled yes` processes in a temp dir, joined by
//! `redis-cli --cluster create`, torn down when dropped. A watchdog shell
//! also kills them when the test process exits without dropping them (a
//! cluster kept in a static is never dropped).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use leaseq_redis::RedisOptions;
use leaseq_testkit::ports::spawn_on_free_port;

/// One running cluster.
#[derive(Debug)]
pub struct LocalCluster {
    pub ports: Vec<u16>,
    pub dir: PathBuf,
    children: Vec<Child>,
    watchdog: Option<Child>,
}

fn redis_cmd(port: u16, args: &[&str]) -> Result<redis::Value, String> {
    leaseq_testkit::redis_server::command(
        &format!("redis://127.0.0.1:{port}"),
        args,
        Duration::from_millis(500),
    )
}

/// A node's answer as text (for INFO-like replies).
pub fn node_text(port: u16, args: &[&str]) -> Result<String, String> {
    match redis_cmd(port, args)? {
        redis::Value::BulkString(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        redis::Value::VerbatimString { text, .. } => Ok(text),
        redis::Value::SimpleString(s) => Ok(s),
        redis::Value::Okay => Ok("OK".into()),
        other => Ok(format!("{other:?}")),
    }
}

impl LocalCluster {
    /// Starts three masters and joins them; an error when `redis-server`
    /// or `redis-cli` is missing or the cluster never forms.
    pub fn start() -> Result<Self, String> {
        Self::start_nodes(3, 0)
    }

    /// Three masters with one replica each (six nodes).
    pub fn start_with_replicas() -> Result<Self, String> {
        Self::start_nodes(6, 1)
    }

    /// One node on `port`, in the cluster's dir.
    fn spawn_node(&self, port: u16) -> Result<Child, String> {
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--cluster-enabled", "yes"])
            .args(["--cluster-config-file", &format!("nodes-{port}.conf")])
            .args(["--cluster-node-timeout", "5000"])
            .args(["--appendonly", "no", "--save", ""])
            // Replicas sync at once (the default waits 5 s for others).
            .args(["--repl-diskless-sync-delay", "0"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("redis-server: {e}"))
    }

    /// Starts one node that answers PING (on other ports if it exits at
    /// start), and adds it to the cluster and the watchdog.
    fn start_live_node(&mut self) -> Result<u16, String> {
        let (port, child) = spawn_on_free_port(
            10_000,
            &self.ports,
            |p| self.spawn_node(p),
            |p| redis_cmd(p, &["PING"]).is_ok(),
        )?;
        self.ports.push(port);
        self.children.push(child);
        self.start_watchdog();
        Ok(port)
    }

    /// `nodes` nodes joined with `replicas` replicas per master.
    fn start_nodes(nodes: usize, replicas: usize) -> Result<Self, String> {
        let dir = leaseq_testkit::env::temp_dir("leaseq-cluster")?;
        let mut cluster = LocalCluster {
            ports: Vec::new(),
            dir,
            children: Vec::new(),
            watchdog: None,
        };
        for _ in 0..nodes {
            cluster.start_live_node()?;
        }
        let nodes: Vec<String> = cluster
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&nodes)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("redis-cli: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        for &p in &cluster.ports {
            wait_until(Duration::from_secs(20), || {
                node_text(p, &["CLUSTER", "INFO"]).is_ok_and(|i| i.contains("cluster_state:ok"))
            })
            .map_err(|_| format!("node {p} never reached cluster_state:ok"))?;
        }
        Ok(cluster)
    }

    /// Signals the node on `port` (`KILL`, `STOP`, `CONT`).
    pub fn signal(&self, port: u16, signal: &str) -> Result<(), String> {
        let at = self.ports.iter().position(|&p| p == port);
        let child = at
            .and_then(|i| self.children.get(i))
            .ok_or("no such node")?;
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .map_err(|e| format!("kill: {e}"))?;
        status
            .success()
            .then_some(())
            .ok_or_else(|| format!("kill -{signal} failed"))
    }

    /// Starts a new empty node and makes it a replica of `master`
    /// (`CLUSTER MEET`, then `CLUSTER REPLICATE` once it knows the
    /// master); returns its port.
    pub fn add_replica(&mut self, master: u16) -> Result<u16, String> {
        let port = self.start_live_node()?;
        let id = node_text(master, &["CLUSTER", "MYID"])?;
        node_text(port, &["CLUSTER", "MEET", "127.0.0.1", &master.to_string()])?;
        wait_until(Duration::from_secs(10), || {
            node_text(port, &["CLUSTER", "NODES"]).is_ok_and(|n| n.contains(&id))
        })
        .map_err(|_| format!("node {port} never learnt of {master}"))?;
        node_text(port, &["CLUSTER", "REPLICATE", &id])?;
        Ok(port)
    }

    /// The port of `master`'s replica (from each node's `INFO replication`).
    pub fn replica_of(&self, master: u16) -> Result<u16, String> {
        let line = format!("master_port:{master}");
        self.ports
            .iter()
            .copied()
            .find(|&p| {
                p != master
                    && node_text(p, &["INFO", "replication"])
                        .is_ok_and(|i| i.lines().any(|l| l.trim() == line))
            })
            .ok_or_else(|| format!("no replica of {master}"))
    }

    /// Whether `master` has a replica in sync (`state=online`).
    pub fn replica_online(&self, master: u16) -> bool {
        node_text(master, &["INFO", "replication"]).is_ok_and(|i| i.contains("state=online"))
    }

    /// Kills the servers and removes the dir once this process is gone.
    fn start_watchdog(&mut self) {
        let pids: Vec<String> = self.children.iter().map(|c| c.id().to_string()).collect();
        let script = format!(
            "while kill -0 {me} 2>/dev/null; do sleep 0.3; done; kill -9 {pids} 2>/dev/null; rm -rf '{dir}'",
            me = std::process::id(),
            pids = pids.join(" "),
            dir = self.dir.display()
        );
        if let Some(mut old) = self.watchdog.take() {
            let _ = old.kill();
            let _ = old.wait();
        }
        self.watchdog = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
    }

    /// Seed URLs of every node.
    pub fn seeds(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// Settings for this cluster under `prefix`.
    pub fn config(&self, prefix: &str) -> RedisOptions {
        RedisOptions::cluster(self.seeds())
            .prefix(prefix)
            .test_hooks(true)
    }

    /// The port of the master serving `slot` (from `CLUSTER SLOTS` of a node).
    pub fn owner_of(&self, slot: u16) -> Result<u16, String> {
        let v = redis_cmd(self.ports[0], &["CLUSTER", "SLOTS"])?;
        let redis::Value::Array(ranges) = v else {
            return Err("CLUSTER SLOTS: not an array".into());
        };
        for r in ranges {
            let redis::Value::Array(f) = r else { continue };
            let (
                Some(redis::Value::Int(lo)),
                Some(redis::Value::Int(hi)),
                Some(redis::Value::Array(node)),
            ) = (f.first(), f.get(1), f.get(2))
            else {
                continue;
            };
            if (*lo..=*hi).contains(&i64::from(slot)) {
                if let Some(redis::Value::Int(port)) = node.get(1) {
                    return u16::try_from(*port).map_err(|e| e.to_string());
                }
            }
        }
        Err(format!("no owner for slot {slot}"))
    }

    /// Deletes every key under `prefix` on every node.
    pub fn delete_prefix(&self, prefix: &str) {
        for &p in &self.ports {
            super::delete_prefix(&format!("redis://127.0.0.1:{p}"), prefix);
        }
    }
}

/// Polls `f` until it holds or `limit` passes.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> Result<(), ()> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Err(())
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The cluster shared by every test of one test binary, started on first use.
pub fn shared() -> Result<&'static LocalCluster, String> {
    static CLUSTER: OnceLock<Result<LocalCluster, String>> = OnceLock::new();
    CLUSTER
        .get_or_init(LocalCluster::start)
        .as_ref()
        .map_err(Clone::clone)
}
