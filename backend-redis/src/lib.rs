//! The Redis backend of leaseq: every state transition is one Lua script,
//! so no transition is split across round trips, and the server's `TIME`
//! decides every lease.
//!
//! ```
//! # #[cfg(feature = "redis-rs")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> leaseq_core::Result<()> {
//! use leaseq_core::{Backend, BackendExt, NewItem, QueueName};
//! use leaseq_redis::{RedisConfig, RedisRsBackend};
//! use std::time::Duration;
//!
//! let url = std::env::var("LEASEQ_REDIS_URL").unwrap_or("redis://127.0.0.1:6379".into());
//! let config = RedisConfig::new(&url).prefix(format!("doc-{}", std::process::id()));
//! let backend = match RedisRsBackend::connect(config).await {
//!     Ok(b) => b,
//!     Err(e) => return Ok(println!("skipped: no Redis at {url}: {e}")),
//! };
//! let queue = QueueName::new("emails")?;
//! backend.enqueue(&queue, vec![NewItem::new("hello").priority(5)]).await?;
//! let lease = backend.claim_one(&queue, Duration::from_secs(30)).await?.expect("an item");
//! assert_eq!(&lease.payload[..], b"hello");
//! backend.ack(&lease.key).await?;
//! assert_eq!(backend.purge(&queue).await?, 0);
//! # // Leave nothing behind: the purge keeps the id counter, so ids stay unique.
//! # let keys = backend.keys(&queue)?;
//! # let mut raw = redis::Client::open(url.as_str()).and_then(|c| c.get_connection()).expect("raw");
//! # let _: () = redis::cmd("DEL").arg(keys.seq()).query(&mut raw).expect("del");
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "redis-rs"))]
//! # fn main() {}
//! ```
//!
//! # Clients
//! Two client crates, one set of scripts and one key layout:
//! - feature `redis-rs` (default): [`RedisRsBackend`], on the `redis`
//!   crate's connection manager (multiplexed, reconnects by itself);
//! - feature `fred`: [`FredBackend`], on a `fred` client.
//!
//! Each is a thin [`ScriptClient`] adapter: run a script by `EVALSHA`,
//! loading it on `NOSCRIPT`, and a blocking pop on a connection of its own.
//! Neither client replays a script cut off by a dropped connection: the call
//! fails with [`leaseq_core::Error::Backend`] and the next call reconnects.
//!
//! # Layout
//! Every key of a queue carries the hash tag `{prefix:queue}`, so each script
//! touches one slot and the layout is valid on Redis Cluster; see
//! [`KeyLayout`] for the table. Indexes are sorted sets, so none can hold an
//! id twice: Ready (score `-priority`, ties broken by the zero-padded id, so
//! highest priority first and FIFO within one), Scheduled (due time), Leased
//! (lease expiry), Dead (death order). Each item is one hash with its
//! payload, attempts, token, state and dedup key. Ids come from `INCR` and
//! are exact up to 2^53 (Lua numbers are doubles); priorities are any `i32`.
//!
//! # Transitions
//! - claim: promotes due Scheduled items (one bounded batch), then takes
//!   Ready entries in order; the `i`-th lease of the claim gets the spec's
//!   token [`leaseq_core::ClaimSpec::token`]`(i)`, `attempts + 1` and
//!   `expiry = TIME + ttl`, all in one script. Batch enqueue and
//!   `claim(max)` are one round trip each.
//! - ack / extend / release / fail check the item's current token and its
//!   state in the same script, so a stale lease gets `LeaseLost` and changes
//!   nothing.
//! - reap reads only expired entries (`ZRANGEBYSCORE leased -inf now LIMIT`)
//!   in bounded batches: its cost grows with expired leases, not live ones.
//!   Any number of reapers may run: each script sees the others' effects.
//!
//! No script unpacks or walks an unbounded set: every batch is bounded
//! (the one walk over live leases, `recover_claim`'s, goes page by page).
//!
//! # Lost replies
//! A call whose reply is lost is settled by its own identity
//! ([`leaseq_core::settle`]), each one script:
//! - `recover_claim` pages through the live part of the Leased index
//!   (expiry after `TIME`) and returns the leases whose token is of the
//!   claim's family (the first 24 of its 32 stored hex digits), sorted by
//!   token, i.e. in claim order. Its cost grows with the queue's live
//!   leases; it runs only after a claim whose reply was lost.
//! - `lease_fate` reads the item's state and token and the server's clock.
//! - `enqueue_once` looks up the request's key (`{prefix:queue}:req:<id>`,
//!   in the queue's slot); when present it returns the stored results and
//!   writes nothing, else it enqueues and stores the results there with
//!   `PX` = [`leaseq_core::limits::REQUEST_MEMORY`], in the same script.
//!
//! Failures are classified by what they prove:
//! [`leaseq_core::Error::Unavailable`] when the script certainly did not
//! run (the connection was refused, no cluster node served the slot, the
//! client failed the command before writing it, or the server refused it
//! before it ran: `OOM`, `LOADING`, `BUSY`, `MASTERDOWN`, `READONLY`,
//! `NOSCRIPT`, `MISCONF`, `NOREPLICAS`, and `MOVED` / `ASK` / `TRYAGAIN` /
//! `CLUSTERDOWN` once no longer retried); [`leaseq_core::Error::Backend`]
//! when it may have run (timeouts, connections dropped after sending,
//! script runtime errors). A failed `connect` is `Unavailable`. On one
//! server the `fred` adapter hands a script to its client only while that
//! client is connected (it waits up to the connect timeout for a reconnect,
//! then fails `Unavailable`), since a command left waiting in the client's
//! buffer and then timed out could not tell whether it was written.
//!
//! # Self-healing
//! A claim or reap that meets an index entry whose item hash is missing, a
//! key of the wrong type where the hash should be (the `WRONGTYPE` case), or
//! an id also held by the index its item says it is in, removes the bad
//! entry, logs a `tracing` warning, reports a [`leaseq_core::Repair`] and
//! goes on to the next entry in the same call. A structural key of the wrong
//! type (an index that is not a sorted set) cannot be repaired without losing
//! items: scripts refuse to run and return [`leaseq_core::Error::Corrupt`]
//! before writing anything.
//!
//! # Waiting for work
//! Enqueue, release, reap and redrive push a marker onto the queue's notify
//! list (at most 32 kept); idle workers `BLPOP` it on a dedicated
//! connection. A lost marker delays work by at most the caller's poll
//! interval (the wait's timeout).
//!
//! # Redis Cluster
//! [`RedisConfig::cluster`] (a list of seed node URLs) or
//! `RedisConfig::new("redis+cluster://host:port,host:port")` connects
//! either client to a cluster: `redis` through its cluster connection,
//! `fred` as a clustered client. Every key of a queue shares the hash tag
//! `{prefix:queue}` ([`KeyLayout::slot`], [`key_slot`]), so each script runs
//! on one node and never meets `CROSSSLOT`.
//!
//! Redirections and migrations never run a script twice. A script is sent
//! again only after a reply that proves it did not run: `MOVED` / `ASK`
//! (the node refused it), `TRYAGAIN` (the slot is split mid-migration) and
//! `CLUSTERDOWN`. While its slot migrates a script could start on the old
//! node with some item keys already moved and fail halfway, leaving a half
//! transition; so each script's first command probes the slot (a two-key
//! `EXISTS` that the server refuses only while the slot is migrating or
//! importing) and stops before any write with `TRYAGAIN`. A script cut off by
//! a dropped connection or a timeout may have run: it is reported as
//! [`leaseq_core::Error::Backend`], never sent again (the `redis` cluster
//! connection is built with no retries of its own; `fred` commands are
//! `fail_fast` and follow no redirection themselves). Scripts are sent by
//! `EVALSHA`, and on `NOSCRIPT` (a node that never saw the script, e.g.
//! after a slot moved) by `EVAL`, which routes by key like `EVALSHA` and
//! caches the script on that node.
//!
//! For throughput beyond one node, [`ShardedBackend`] spreads one logical
//! queue over K physical queues (`{prefix:queue:0}` … `{prefix:queue:K-1}`);
//! order then holds per shard only (see its docs).
//!
//! # Durability
//! Items survive a server crash when the server runs with `appendonly yes`
//! and `appendfsync always`; declare that with [`RedisConfig::durable`].

mod backend;
mod client;
#[cfg(feature = "fred")]
mod client_fred;
#[cfg(feature = "redis-rs")]
mod client_redis_rs;
mod cluster_url;
mod config;
mod decode;
mod hooks;
mod keys;
mod ops;
mod reply;
mod scripts;
mod sharded;

pub use backend::RedisBackend;
pub use client::{ClientError, ScriptClient};
#[cfg(feature = "fred")]
pub use client_fred::{FredBackend, FredClient};
#[cfg(feature = "redis-rs")]
pub use client_redis_rs::{RedisRsBackend, RedisRsClient};
pub use config::RedisConfig;
pub use keys::{key_slot, KeyLayout};
pub use ops::MAX_PEEK;
pub use reply::Reply;
pub use scripts::Script;
pub use sharded::{
    sharded_id, split_id, ShardNamer, Sharded, ShardedBackend, ShardedRedisBackend, MAX_SHARDS,
};
