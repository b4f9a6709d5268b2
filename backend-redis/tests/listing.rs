//! `queues` on Redis, on both clients: the registry protocol under the
//! interleavings that would break a simpler one (each forced with a client
//! that holds chosen script calls until the test lets them go), no scan of
//! the keyspace, prefixes kept apart, and queues written before the
//! listing existed.
#![cfg(any(feature = "redis-rs", feature = "fred"))]

#[macro_use]
mod common;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use common::server::PrivateServer;
use common::Which;
use leaseq_core::{Backend, BackendExt, NewItem, QueueName};
use leaseq_redis::client::{ClientError, NodeReply, Reply, Script, ScriptClient};
use leaseq_redis::{RedisBackend, RedisOptions};
use redis::AsyncCommands;
use tokio::sync::oneshot;

const TTL: Duration = Duration::from_secs(60);

/// Holds the `nth` call of one script until the test lets it go.
#[derive(Debug)]
struct Gate {
    script: &'static str,
    nth: usize,
    seen: usize,
    /// Told when the held call arrives.
    reached: Option<oneshot::Sender<()>>,
    /// Awaited before the held call is sent.
    go: Option<oneshot::Receiver<()>>,
}

/// The test's handles on one gate.
struct Held {
    reached: oneshot::Receiver<()>,
    go: oneshot::Sender<()>,
}

impl Held {
    async fn arrived(&mut self, what: &str) {
        (&mut self.reached)
            .await
            .unwrap_or_else(|_| panic!("{what}: the held call never came"));
    }

    fn release(self) {
        let _ = self.go.send(());
    }
}

/// A client adapter that passes every call to `inner`, holding the ones a
/// gate names.
#[derive(Debug)]
struct Gated<C> {
    inner: C,
    gates: Mutex<Vec<Gate>>,
}

impl<C> Gated<C> {
    fn new(inner: C) -> Self {
        Gated {
            inner,
            gates: Mutex::new(Vec::new()),
        }
    }

    /// Holds the `nth` (from 1) call of `script`.
    fn hold(&self, script: &'static str, nth: usize) -> Held {
        let (reached_tx, reached) = oneshot::channel();
        let (go, go_rx) = oneshot::channel();
        self.gates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Gate {
                script,
                nth,
                seen: 0,
                reached: Some(reached_tx),
                go: Some(go_rx),
            });
        Held { reached, go }
    }
}

#[async_trait]
impl<C: ScriptClient> ScriptClient for Gated<C> {
    async fn eval(
        &self,
        script: &Script,
        keys: &[String],
        args: &[Bytes],
    ) -> Result<Reply, ClientError> {
        let held = {
            let mut gates = self.gates.lock().unwrap_or_else(PoisonError::into_inner);
            let mut held = None;
            for g in gates.iter_mut().filter(|g| g.script == script.name()) {
                g.seen += 1;
                if g.seen == g.nth {
                    held = g.reached.take().zip(g.go.take());
                }
            }
            held
        };
        if let Some((reached, go)) = held {
            let _ = reached.send(());
            let _ = go.await;
        }
        self.inner.eval(script, keys, args).await
    }

    async fn wait_marker(&self, key: &str, timeout: Duration) -> Result<bool, ClientError> {
        self.inner.wait_marker(key, timeout).await
    }

    async fn admin(&self, args: &[&str]) -> Result<Vec<NodeReply>, ClientError> {
        self.inner.admin(args).await
    }
}

/// Two gated backends of `which` on `config`, or `None` after the skip line.
async fn two<F, Fut>(which: Which, config: &RedisOptions, run: F)
where
    F: FnOnce(Box<dyn GatedPair>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let pair: Box<dyn GatedPair> = match which {
        #[cfg(feature = "redis-rs")]
        Which::RedisRs => {
            let mk = || async {
                let c = leaseq_redis::client::RedisRsClient::connect(config).await?;
                RedisBackend::with_client(Gated::new(c), config.clone())
            };
            match (mk().await, mk().await) {
                (Ok(a), Ok(b)) => Box::new((Arc::new(a), Arc::new(b))),
                (Err(e), _) | (_, Err(e)) => return common::unavailable(&common::url(), e),
            }
        }
        #[cfg(feature = "fred")]
        Which::Fred => {
            let mk = || async {
                let c = leaseq_redis::client::FredClient::connect(config).await?;
                RedisBackend::with_client(Gated::new(c), config.clone())
            };
            match (mk().await, mk().await) {
                (Ok(a), Ok(b)) => Box::new((Arc::new(a), Arc::new(b))),
                (Err(e), _) | (_, Err(e)) => return common::unavailable(&common::url(), e),
            }
        }
        #[allow(unreachable_patterns)]
        _ => return,
    };
    run(pair).await;
}

/// Two handles on one store, each with its own gated client.
trait GatedPair: Send + Sync {
    fn backend(&self, i: usize) -> Arc<dyn Backend>;
    fn hold(&self, i: usize, script: &'static str, nth: usize) -> Held;
}

impl<C: ScriptClient> GatedPair for (Arc<RedisBackend<Gated<C>>>, Arc<RedisBackend<Gated<C>>>) {
    fn backend(&self, i: usize) -> Arc<dyn Backend> {
        if i == 0 {
            self.0.clone()
        } else {
            self.1.clone()
        }
    }

    fn hold(&self, i: usize, script: &'static str, nth: usize) -> Held {
        let b = if i == 0 { &self.0 } else { &self.1 };
        b.client().hold(script, nth)
    }
}

fn config(prefix: &str) -> RedisOptions {
    RedisOptions::new(common::url()).prefix(prefix)
}

async fn drain_one(b: &Arc<dyn Backend>, q: &QueueName) {
    let lease = b
        .claim_one(q, TTL)
        .await
        .expect("claim")
        .expect("an item to claim");
    b.ack(&lease.key).await.expect("ack");
}

/// A client registers the queue and stalls before its batch; another
/// registers over it, fills and empties the queue; a listing reads the
/// registry and prunes the empty queue; the stalled batch is then sent,
/// and only after that does the listing delete the field it read. The
/// stalled registration predates the prune, so the batch must register
/// again: else its item would sit in a queue whose field the listing
/// deletes (the field holds the other client's token), hidden for good.
async fn a_registration_older_than_a_prune_cannot_hide_the_queue(which: Which) {
    let prefix = common::fresh_prefix("lrace");
    let _cleanup = common::Cleanup {
        url: common::url(),
        prefix: prefix.clone(),
    };
    two(which, &config(&prefix), |pair| async move {
        let (a, b) = (pair.backend(0), pair.backend(1));
        let q = QueueName::new("raced").expect("name");
        // a's second enqueue call is its batch after registering.
        let mut stalled = pair.hold(0, "enqueue", 2);
        let first = {
            let (a, q) = (a.clone(), q.clone());
            tokio::spawn(async move { a.enqueue(&q, vec![NewItem::new("x")]).await })
        };
        stalled.arrived("a's batch").await;
        b.enqueue(&q, vec![NewItem::new("y")])
            .await
            .expect("enqueue");
        drain_one(&b, &q).await;
        // b's listing: its second registry call deletes the fields of the
        // queues it found empty.
        let mut deleting = pair.hold(1, "queues_registry", 2);
        let listing = {
            let b = b.clone();
            tokio::spawn(async move { b.queues().await })
        };
        deleting.arrived("the listing's delete").await;
        stalled.release();
        first.await.expect("join").expect("a's enqueue");
        deleting.release();
        let seen = listing.await.expect("join").expect("queues");
        assert!(
            !seen.contains(&q),
            "{}: the listing counted the queue before a's item: {seen:?}",
            which.name()
        );
        assert_eq!(b.stats(&q).await.expect("stats").total(), 1);
        assert_eq!(
            b.queues().await.expect("queues"),
            vec![q.clone()],
            "{}: the queue holds an item but is not listed",
            which.name()
        );
        assert_eq!(a.queues().await.expect("queues"), vec![q.clone()]);
        assert_eq!(b.admin().expect("admin").purge(&q).await.expect("purge"), 1);
        assert!(b.queues().await.expect("queues").is_empty());
    })
    .await;
}

/// Two first enqueues race: a registers first but writes its token last,
/// after b registered and wrote its item, so the registry holds a's token
/// and `listed` b's. Emptied and listed, the queue leaves nothing behind:
/// the field is dropped by the token the registry read returned.
async fn racing_first_enqueues_leave_no_field_behind(which: Which) {
    let prefix = common::fresh_prefix("lfield");
    let _cleanup = common::Cleanup {
        url: common::url(),
        prefix: prefix.clone(),
    };
    two(which, &config(&prefix), |pair| async move {
        let (a, b) = (pair.backend(0), pair.backend(1));
        let q = QueueName::new("twice").expect("name");
        let mut registering = pair.hold(0, "queues_register", 1);
        let first = {
            let (a, q) = (a.clone(), q.clone());
            tokio::spawn(async move { a.enqueue(&q, vec![NewItem::new("x")]).await })
        };
        registering.arrived("a's registration").await;
        b.enqueue(&q, vec![NewItem::new("y")])
            .await
            .expect("enqueue");
        registering.release();
        first.await.expect("join").expect("a's enqueue");
        assert_eq!(b.queues().await.expect("queues"), vec![q.clone()]);
        assert_eq!(a.admin().expect("admin").purge(&q).await.expect("purge"), 2);
        assert!(a.queues().await.expect("queues").is_empty());
        let keys = leaseq_redis::keys::KeyLayout::new(&prefix, &q).expect("keys");
        let registry = format!("{{{prefix}:_}}:queues");
        let mut raw = common::raw(&common::url()).await;
        let field: Option<String> = raw.hget(&registry, q.as_str()).await.expect("hget");
        assert_eq!(
            field,
            None,
            "{}: a registry field outlived its queue",
            which.name()
        );
        let listed: bool = raw.exists(keys.listed()).await.expect("exists");
        assert!(!listed, "{}: `listed` outlived the queue", which.name());
    })
    .await;
}

/// Queues whose items were written before the listing existed (no
/// `listed` key, no registry field) are listed from their next enqueue.
async fn queues_from_before_the_listing_appear_after_their_next_enqueue(which: Which) {
    let Some((b, cleanup)) = common::backend(which, "lold").await else {
        return;
    };
    let q = QueueName::new("old").expect("name");
    b.enqueue(&q, vec![NewItem::new("a")])
        .await
        .expect("enqueue");
    let keys = leaseq_redis::keys::KeyLayout::new(&cleanup.prefix, &q).expect("keys");
    let registry = format!("{{{}:_}}:queues", cleanup.prefix);
    let mut raw = common::raw(&common::url()).await;
    // What a store written by an older version holds: the items only.
    let _: () = raw.del(keys.listed()).await.expect("del");
    let _: () = raw.del(&registry).await.expect("del");
    assert!(b.queues().await.expect("queues").is_empty());
    b.enqueue(&q, vec![NewItem::new("b")])
        .await
        .expect("enqueue");
    assert_eq!(b.queues().await.expect("queues"), vec![q.clone()]);
    assert_eq!(b.stats(&q).await.expect("stats").total(), 2);
}

/// The listing reads the registry and each registered queue's slot: no
/// `KEYS` or `SCAN` reaches the server. Two prefixes on one server list
/// their own queues only.
async fn the_listing_scans_nothing_and_keeps_prefixes_apart(which: Which) {
    let server = match PrivateServer::start_volatile() {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private redis-server", e),
    };
    let on = |prefix: &str| common::connect(which, RedisOptions::new(server.url()).prefix(prefix));
    let (one, two) = match (on("one").await, on("two").await) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return common::unavailable(&server.url(), e),
    };
    let q = |n: &str| QueueName::new(n).expect("name");
    for name in ["c", "a", "b"] {
        one.enqueue(&q(name), vec![NewItem::new("x")])
            .await
            .expect("enqueue");
    }
    two.enqueue(&q("z"), vec![NewItem::new("x")])
        .await
        .expect("enqueue");
    one.admin()
        .expect("admin")
        .purge(&q("b"))
        .await
        .expect("purge");
    assert_eq!(one.queues().await.expect("queues"), vec![q("a"), q("c")]);
    assert_eq!(two.queues().await.expect("queues"), vec![q("z")]);
    let info = match server.command(&["INFO", "commandstats"]).expect("info") {
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("INFO: {other:?}"),
    };
    let ran: Vec<&str> = info
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter_map(|l| l.split(':').next())
        .collect();
    assert!(ran.contains(&"hgetall"), "{}: ran {ran:?}", which.name());
    for scan in ["keys", "scan", "hscan"] {
        assert!(
            !ran.contains(&scan),
            "{}: the server ran {scan}: {ran:?}",
            which.name()
        );
    }
}

for_each_client!(
    a_registration_older_than_a_prune_cannot_hide_the_queue,
    racing_first_enqueues_leave_no_field_behind,
    queues_from_before_the_listing_appear_after_their_next_enqueue,
    the_listing_scans_nothing_and_keeps_prefixes_apart,
);
