//! `rediss+cluster://` on a private 3-master Redis Cluster that speaks TLS
//! only (clients and the cluster bus: `--port 0`, `--tls-port`,
//! `--tls-cluster yes`), with a throwaway CA: both clients do round trips
//! on queues spread over the masters, and a `rediss+cluster://` URL to a
//! plaintext port is refused.
#![cfg(all(feature = "tls", any(feature = "redis-rs", feature = "fred")))]

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::cluster::wait_until;
use common::Which;
use leaseq_core::{BackendExt, NewItem, QueueName};
use leaseq_redis::keys::KeyLayout;
use leaseq_redis::RedisOptions;
use leaseq_testkit::ports::spawn_on_free_port;
use leaseq_testkit::redis_server::command_tls;
use leaseq_testkit::tls::TestPki;

/// Three TLS-only cluster masters, killed (and their dir removed) when
/// dropped.
struct TlsCluster {
    pki: TestPki,
    ports: Vec<u16>,
    dir: PathBuf,
    children: Vec<Child>,
    watchdog: Option<Child>,
}

impl TlsCluster {
    fn node(&self, port: u16, args: &[&str]) -> Result<redis::Value, String> {
        command_tls(
            &format!("rediss://127.0.0.1:{port}"),
            self.pki.ca_pem(),
            args,
            Duration::from_millis(500),
        )
    }

    fn start() -> Result<Self, String> {
        let pki = TestPki::generate()?;
        let dir = leaseq_testkit::env::temp_dir("leaseq-tls-cluster")?;
        let mut c = TlsCluster {
            pki,
            ports: Vec::new(),
            dir,
            children: Vec::new(),
            watchdog: None,
        };
        for _ in 0..3 {
            let spawn = |port: u16| {
                Command::new("redis-server")
                    .args(["--port", "0", "--tls-port", &port.to_string()])
                    .args(["--bind", "127.0.0.1"])
                    .arg("--tls-cert-file")
                    .arg(c.pki.cert_path())
                    .arg("--tls-key-file")
                    .arg(c.pki.key_path())
                    .arg("--tls-ca-cert-file")
                    .arg(c.pki.ca_path())
                    .args(["--tls-auth-clients", "no", "--tls-cluster", "yes"])
                    .args(["--cluster-enabled", "yes"])
                    .args(["--cluster-config-file", &format!("nodes-{port}.conf")])
                    .args(["--cluster-node-timeout", "5000"])
                    .args(["--appendonly", "no", "--save", ""])
                    .arg("--dir")
                    .arg(&c.dir)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| format!("redis-server: {e}"))
            };
            let answers = |p: u16| c.node(p, &["PING"]).is_ok();
            let (port, child) = spawn_on_free_port(10_000, &c.ports, spawn, answers)
                .map_err(|e| format!("TLS node: {e}"))?;
            c.ports.push(port);
            c.children.push(child);
        }
        c.start_watchdog();
        let nodes: Vec<String> = c.ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        // `--cluster create` waits for the nodes to join, for ever if the
        // cluster bus cannot connect: bounded here.
        let mut create = Command::new("redis-cli")
            .arg("--tls")
            .arg("--cacert")
            .arg(c.pki.ca_path())
            .args(["--cluster", "create"])
            .args(&nodes)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("redis-cli: {e}"))?;
        let mut status = None;
        let _ = wait_until(Duration::from_secs(60), || {
            status = create.try_wait().ok().flatten();
            status.is_some()
        });
        match status {
            Some(s) if s.success() => {}
            Some(s) => return Err(format!("redis-cli --tls --cluster create: {s}")),
            None => {
                let _ = create.kill();
                let _ = create.wait();
                return Err("redis-cli --tls --cluster create: the nodes never joined".into());
            }
        }
        for &p in &c.ports {
            wait_until(Duration::from_secs(20), || {
                matches!(c.node(p, &["CLUSTER", "INFO"]),
                    Ok(redis::Value::BulkString(b)) if String::from_utf8_lossy(&b).contains("cluster_state:ok"))
                    || matches!(c.node(p, &["CLUSTER", "INFO"]),
                    Ok(redis::Value::VerbatimString { text, .. }) if text.contains("cluster_state:ok"))
            })
            .map_err(|_| format!("TLS node {p} never reached cluster_state:ok"))?;
        }
        Ok(c)
    }

    /// Kills the servers and removes the dir once this process is gone
    /// (a test killed before its drop).
    fn start_watchdog(&mut self) {
        let pids: Vec<String> = self.children.iter().map(|c| c.id().to_string()).collect();
        let script = format!(
            "while kill -0 {me} 2>/dev/null; do sleep 0.3; done; kill -9 {pids} 2>/dev/null; rm -rf '{dir}'",
            me = std::process::id(),
            pids = pids.join(" "),
            dir = self.dir.display()
        );
        self.watchdog = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
    }

    fn url(&self) -> String {
        let hosts: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("rediss+cluster://{}", hosts.join(","))
    }
}

impl Drop for TlsCluster {
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

/// Queue names whose slots are not all on one master (the slots split at
/// 5461 and 10923 on a fresh 3-master cluster).
fn spread_queues(prefix: &str) -> Vec<QueueName> {
    let mut masters = std::collections::BTreeMap::new();
    for i in 0..200 {
        let q = QueueName::new(format!("q{i}")).expect("valid");
        let slot = KeyLayout::new(prefix, &q).expect("layout").slot();
        let master = usize::from(slot > 5460) + usize::from(slot > 10922);
        masters.entry(master).or_insert(q);
        if masters.len() == 3 {
            break;
        }
    }
    assert_eq!(masters.len(), 3);
    masters.into_values().collect()
}

async fn round_trips(cluster: &TlsCluster, which: Which) {
    let prefix = format!("tls-{}", which.name());
    let config = RedisOptions::new(cluster.url())
        .tls_root_cert(cluster.pki.ca_pem())
        .prefix(&prefix);
    assert!(config.is_cluster() && config.uses_tls());
    let b = common::connect(which, config)
        .await
        .unwrap_or_else(|e| panic!("{}: connect: {e}", which.name()));
    for q in spread_queues(&prefix) {
        b.enqueue(&q, vec![NewItem::new("over tls")])
            .await
            .expect("enqueue");
        b.wait_for_work(&q, Duration::from_secs(5)).await;
        let lease = b
            .claim_one(&q, Duration::from_secs(30))
            .await
            .expect("claim")
            .expect("an item");
        assert_eq!(&lease.payload[..], b"over tls");
        b.ack(&lease.key).await.expect("ack");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_cluster_round_trips_and_refuses_plaintext() {
    let cluster = match TlsCluster::start() {
        Ok(c) => c,
        Err(e) => return common::unavailable("a local TLS Redis Cluster", e),
    };
    for which in [
        #[cfg(feature = "redis-rs")]
        Which::RedisRs,
        #[cfg(feature = "fred")]
        Which::Fred,
    ] {
        round_trips(&cluster, which).await;
    }

    // A TLS cluster URL to a plaintext server: refused by both clients.
    let plain = match common::server::PrivateServer::start_volatile() {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private redis-server", e),
    };
    for which in [
        #[cfg(feature = "redis-rs")]
        Which::RedisRs,
        #[cfg(feature = "fred")]
        Which::Fred,
    ] {
        let config = RedisOptions::new(format!("rediss+cluster://127.0.0.1:{}", plain.port()))
            .tls_root_cert(cluster.pki.ca_pem())
            .connect_timeout(Duration::from_secs(1));
        assert!(
            common::connect(which, config).await.is_err(),
            "{}: rediss+cluster:// connected to a plaintext server",
            which.name()
        );
    }
    assert_eq!(
        plain.command(&["DBSIZE"]).expect("dbsize"),
        redis::Value::Int(0)
    );
}
