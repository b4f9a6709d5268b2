//! The Redis backend of leaseq: every state transition is one Lua script,
//! so no transition is split across round trips, and the server's `TIME`
//! decides every lease. It needs Redis 7.0 or later, with
//! `maxmemory-policy noeviction` (see [Persistence and what is
//! lost](#persistence-and-what-is-lost)).
//!
//! ```
//! # #[cfg(feature = "redis-rs")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> leaseq_core::Result<()> {
//! use leaseq_core::{Backend, BackendExt, NewItem, QueueName};
//! use leaseq_redis::{RedisOptions, RedisRsBackend};
//! use std::time::Duration;
//!
//! let url = std::env::var("LEASEQ_REDIS_URL").unwrap_or("redis://127.0.0.1:6379".into());
//! let config = RedisOptions::new(&url).prefix(format!("doc-{}", std::process::id()));
//! let backend = match RedisRsBackend::connect(config).await {
//!     Ok(b) => b,
//!     Err(e) => return Ok(println!("skipped: no Redis at {url}: {e}")),
//! };
//! let queue = QueueName::new("emails")?;
//! backend.enqueue(&queue, vec![NewItem::new("hello").priority(5)]).await?;
//! let lease = backend.claim_one(&queue, Duration::from_secs(30)).await?.expect("an item");
//! assert_eq!(&lease.payload[..], b"hello");
//! backend.ack(&lease.key).await?;
//! assert_eq!(backend.admin()?.purge(&queue).await?, 0);
//! # backend.admin()?.delete_queue(&queue).await?; // leave nothing behind
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
#![cfg_attr(
    feature = "fred",
    doc = "- feature `fred`: [`FredBackend`], on a `fred` client."
)]
#![cfg_attr(
    not(feature = "fred"),
    doc = "- feature `fred`: `FredBackend`, on a `fred` client."
)]
//!
//! Each is a thin [`client::ScriptClient`] adapter: run a script by `EVALSHA`,
//! loading it on `NOSCRIPT`, a blocking pop on a connection of its own, and
//! plain commands on every master for the checks made at connect.
//! Neither client replays a script cut off by a dropped connection: the call
//! fails with [`leaseq_core::Error::OutcomeUnknown`] and the next call reconnects.
//!
//! # TLS
//! `rediss://host:port` (one server) and `rediss+cluster://host:port,…`
//! (or [`RedisOptions::cluster`] with `rediss://` seeds) connect over TLS,
//! on either client, with feature `tls` (on by default): rustls with the
//! `ring` provider, the server's certificate checked against the system's
//! roots (which honour `SSL_CERT_FILE`) and its host name (a DNS name or
//! an IP address) against the URL, or against the CA certificates given to
//! [`RedisOptions::tls_root_cert`] in their place.
//!
//! A URL that asks for TLS is never dialled in plaintext: without the
//! `tls` feature `connect` refuses it with
//! [`leaseq_core::Error::InvalidInput`] naming the feature (the `fred`
//! crate alone would connect in plaintext), and a server that does not
//! speak TLS, or whose certificate does not check, fails the handshake
//! ([`leaseq_core::Error::Unavailable`]) before any command is sent. A
//! root certificate with a `redis://` URL, and cluster seeds that mix
//! `redis://` and `rediss://`, are refused as contradictory.
//!
//! Both clients build their TLS settings from rustls's process-wide
//! crypto provider: when the program has installed none, `connect`
//! installs `ring`'s (install your own first to use another).
//!
//! ```
//! use leaseq_redis::RedisOptions;
//! # let ca_pem: Vec<u8> = Vec::new();
//! // let ca_pem = std::fs::read("/etc/redis/tls/ca.pem")?;
//! let config = RedisOptions::new("rediss://redis.internal:6380").tls_root_cert(ca_pem);
//! assert!(config.uses_tls());
//! ```
//!
//! # Layout
//! Every key of a queue carries the hash tag `{prefix:queue}`, so each script
//! touches one slot and the layout is valid on Redis Cluster; see
//! [`keys::KeyLayout`] for the table (key layout 2). A batch reads and writes
//! its items with one command per structure, not one per item:
//! - the records live in one hash, `{p:q}:items`, one field per item:
//!   `enq,max,pri,payload` (the server's `TIME` at the enqueue in ms, max
//!   attempts, priority, payload), written once at enqueue;
//! - Ready is a list (`ready:fifo`: priority 0 items never delayed nor
//!   requeued, appended at enqueue, so in id order) and a sorted set
//!   (`ready:ranked`: every other Ready item, score `-priority`, ties broken
//!   by the zero-padded id); a claim merges the two, highest priority first
//!   and FIFO within one. Neither holds an id twice in a way a claim would
//!   hand out twice (a claim drops a second entry as a stray);
//! - a lease is a field of `lease:tokens` (id → its token); a claim's leases
//!   form one **group** (named by the family of the claim's tokens) with
//!   one expiry, one member of the sorted set `lease:groups`;
//! - Scheduled (due time) and Dead (death order) are sorted sets; attempts,
//!   last errors, dedup keys and unique-for holds are hashes with a field
//!   only for the items that have one.
//!
//! An item's state is where it is: Leased when it holds a token, else Dead
//! or Scheduled when that index holds it, else Ready. Ids come from a
//! counter (with a second copy, see [Ids](#ids)) and are exact up to 2^53
//! (Lua numbers are doubles); priorities are any `i32`.
//!
//! # Upgrading
//! Key layout 2 replaced layout 1 (one hash per item, `{p:q}:item:<id>`, and
//! the sorted sets `{p:q}:ready`, `{p:q}:scheduled`, `{p:q}:leased`,
//! `{p:q}:dead`). The two share no index key, and every script first checks
//! that none of layout 1's indexes exists in its queue: a queue that still
//! holds layout 1 data is refused with [`leaseq_core::Error::Corrupt`]
//! naming its keys, and nothing is read or written. So drain every queue
//! (or let it empty) with the version that wrote it before upgrading; a
//! queue whose layout 1 indexes are gone (empty, or purged) is used as is,
//! its id counter going on where it was.
//!
//! The Control group ([Control of running work](#control-of-running-work))
//! adds keys and fields no earlier version reads. Its scripts run beside an
//! earlier version's (each script is loaded by its own SHA1), but that
//! version's processes ignore a pause (they claim from a paused queue),
//! move a cancel-requested item on as before when they end its lease (a
//! cancel request names its lease's token, so it never touches a later
//! lease), and delete the limits hash, and the pause with it, when they
//! clear a queue's limits. So upgrade every process of a store before
//! pausing or cancelling.
//!
//! # Ids
//! An id is never given to two items, even when the counter is lost or
//! taken back. The counter (`{p:q}:seq`) and its copy
//! ([`keys::KeyLayout::id_mark`]) are written together by each enqueue, and the
//! next id is one more than the highest of: the counter, its copy, and the
//! highest id this backend handle has seen in the queue (its enqueues and
//! claims; at most 65,536 queues are remembered). Before an enqueue writes
//! anything it checks that every new id is free (one `HMGET` of the new ids
//! in the records hash); when the counter and its copy are both gone while
//! the queue holds items, or a new id is taken (a counter set back), it
//! walks the records (in pages; cost grows with the queue, once) and
//! re-seeds the counter past the highest id among them, logging a warning.
//!
//! Each enqueue also stores the server's replication id
//! (`master_replid` of `INFO replication`) with the counter
//! ([`keys::KeyLayout::id_run`]). A master promoted by a failover, and a server
//! restarted, run under a new replication id, and may hold a counter from
//! before ids the old history handed out and lost (writes the replica had
//! not received, or made after the snapshot); so when the stored id is
//! another one, the next ids start 2^32 above the counter, past any id
//! handed out since the counter was last kept, and the skip is logged as
//! a warning. Ids stay below 2^53: that leaves room for some two million
//! failovers and restarts per queue. Where an ACL denies `INFO` to the
//! backend's user (as the checks at connect warn), the enqueue cannot
//! read the replication id and skips this check. So:
//! - a counter deleted or set back on its own follows its copy;
//! - a counter lost with its copy re-seeds past the highest id in use;
//! - a server restarted from an older snapshot (which takes both back), or
//!   a replica promoted by a failover that lost writes, never hands out an
//!   id given before, also to a process that has seen none: the new
//!   replication id skips the ids of the lost writes (proved with a forced
//!   failover in `tests/failover.rs`).
//!
//! A batch is written whole or not at all: an enqueue that cannot write it
//! (ids past 2^53, a key of the wrong type) fails with
//! [`leaseq_core::Error::Corrupt`] and writes nothing.
//!
//! # Transitions
//! - claim: promotes due Scheduled items (one bounded batch), then takes
//!   Ready entries in order (quarantining poison, see
//!   [Self-healing](#self-healing)); the `i`-th lease of the claim gets the spec's
//!   token [`leaseq_core::ClaimSpec::token`]`(i)` and `expiry = TIME + ttl`,
//!   all in one script: one `LPOP`, one `HMGET` of the records, one `HSET`
//!   of the tokens and one group for the batch. Batch enqueue and
//!   `claim(max)` are one round trip each.
//! - ack / extend / release / fail check the item's current token in the
//!   same script, so a stale lease gets `LeaseLost` and changes nothing.
//!   `ack_many` reads a batch's tokens with one `HMGET` and deletes its
//!   items with one `HDEL`; the group leaves the index with its last lease.
//!   An extend moves a lease whose claim still holds others into a group of
//!   its own.
//! - reap reads only expired groups (`ZRANGEBYSCORE lease:groups -inf now
//!   LIMIT`) in bounded batches: its cost grows with expired leases, not
//!   live ones. Any number of reapers may run: each script sees the
//!   others' effects.
//!
//! No script unpacks or walks an unbounded set: every batch is bounded
//! (the one walk over live leases, `recover_claim`'s, goes page by page).
//!
//! # Control of running work
//! [`leaseq_core::Control`] and [`leaseq_core::WorkerRegistry`] are offered
//! on both clients and on Redis Cluster, each operation one script in one
//! slot:
//! - cancel: a Ready, Scheduled or Dead item is deleted as `remove_item`
//!   deletes it; a Leased one gets its lease's token recorded in
//!   `{p:q}:cancel`, and every script that ends a lease (ack, `ack_many`,
//!   release, give back, fail, snooze, reap) reads that in the same step
//!   and deletes the item (dedup key freed, no unique-for hold) instead of
//!   moving it on; extend reports it. A queue where no item has a request
//!   pays one `EXISTS` per ack (none per `ack_many`);
//! - pause: the field `paused` of the queue's limits hash, which the claim
//!   reads with its limits (one `HMGET`): a queue neither limited nor
//!   paused has no such key and its claims pay nothing. Purge keeps the
//!   hash, `delete_queue` deletes it; a resume pushes wake-up markers for
//!   the queue's Ready items;
//! - snooze is the give-back script with a delay (attempts as before the
//!   lease, never Dead); run now moves Scheduled entries to Ready as a due
//!   time would;
//! - progress: the lease's token and the value in `{p:q}:progress`, shown
//!   only while that token is the item's (a new lease starts with none,
//!   and the claim clears nothing);
//! - live workers: a hash and a sorted set of expiries in the slot of the
//!   `_` pseudo queue (`src/registry.rs`); every call first deletes a
//!   bounded batch of expired entries.
//!
//! # Finished items
//! [`leaseq_core::History`] is offered on both clients and on Redis
//! Cluster. The policy is the queue's `{p:q}:retention` hash, absent while
//! it keeps nothing; every script that ends an item reads it (one `HMGET`,
//! `ack_many`'s fast path one more key in an `EXISTS` it already asks) and
//! keeps the item in the same step: a field of `{p:q}:done` and a member of
//! `{p:q}:done:completed` or `{p:q}:done:cancelled`, scored by its finish
//! time, so `collect` reads only what it removes. A kept ending adds an
//! entry to `{p:q}:ends`, which the finished signal reads as the cancel
//! signal reads `{p:q}:cancels`. Purge takes the kept items and keeps the
//! policy; `delete_queue` takes both. An earlier version's processes keep
//! nothing when they end an item, so upgrade every process of a store
//! before setting a policy.
//!
//! Every ack, `ack_many` and complete adds to the queue's `{p:q}:completed`
//! counter in its own script ([`leaseq_core::QueueStats::completed`]): one
//! `INCRBY` per call. Purge keeps it, `delete_queue` deletes it (a counter
//! that is not a number starts again at the next ack).
//!
//! Dead letters are bounded by [`leaseq_core::Retention::dead`], kept in
//! `{p:q}:retention:dead` (absent: kept for ever, the default), apart from
//! the `retention` hash so the ack paths read nothing more. Each death
//! records its time in `{p:q}:dead:at`; `collect` reads the Dead index
//! from its oldest death, up to the first letter still kept, and deletes
//! each letter as `remove_item` does (its dedup key freed): its cost
//! follows what it removes. A letter that died under an earlier version
//! has no time of death: the first collect that meets it gives it one, and
//! it ages from there (until then it holds back the age bound of the
//! letters that died after it).
//!
//! # Job events
//! [`leaseq_core::Events`] is offered on both clients and on Redis
//! Cluster, and a subscriber hears the changes made by every handle of the
//! store, in any process. The script that changes a job adds its events
//! ([`leaseq_core::events::JobEvent::to_wire`] texts) to the queue's
//! `{p:q}:events` stream in the same step, one entry per script call, so
//! one queue's events are in the order of its changes. Scripts write them
//! only while `{p:q}:events:on` exists: a process with a subscriber sets it
//! (with a 30 s expiry) and renews it every 10 s. A queue nobody follows
//! pays one `EXISTS` per script call that has an event to tell, and none in
//! the claim, `ack_many`'s fast path and the scripts that end a lease,
//! which ask for the gate in an `EXISTS` they make anyway; no event is
//! built or written.
//!
//! Per backend handle, one task per followed queue reads the stream with
//! `XREAD BLOCK` on a connection of its own and publishes into the
//! handle's [`leaseq_core::events::EventHub`], which every stream of that
//! queue reads; it stops when the last stream is dropped. A subscription
//! sets the gate and reads the stream's last entry before it returns, and
//! reads on from there, so it hears every change made after it returned.
//! Limits, all of them losses (delivery is at most once):
//! - the stream keeps about 4,096 entries (`MAXLEN ~`) and expires 10
//!   minutes after its last entry: a feed further behind than that (or a
//!   subscriber more than [`leaseq_core::events::EVENT_BUFFER`] events
//!   behind its hub, which is told with [`leaseq_core::Error::Lagged`])
//!   misses events;
//! - while a feed's connection is down it reads nothing (it reconnects and
//!   reads on from its last entry, which the stream may have trimmed), and
//!   a process that cannot renew the gate for 30 s lets it lapse: no events
//!   are written until a renewal;
//! - an entry that does not read as events is logged and skipped;
//! - `delete_queue` deletes the stream but not the gate, which expires on
//!   its own; an earlier version's processes write no events.
//!
//! # Lost replies
//! A call whose reply is lost is settled by its own identity
//! ([`leaseq_core::settle`]), each one script:
//! - `recover_claim` reads the group of the claim's family (the first 24 of
//!   its tokens' 32 hex digits) and the leases moved out of it, and returns
//!   the live ones (expiry after `TIME`) whose token is of that family,
//!   sorted by token, i.e. in claim order. Its cost grows with the claim
//!   and with the queue's extended leases; it runs only after a claim
//!   whose reply was lost.
//! - `lease_fate` reads the item's token and state, the server's clock,
//!   and the queue's takeover traces ([`leaseq_core::LeaseTraces::Takeovers`]):
//!   each reap leaves `<id>:<token>` of every lease it takes in
//!   `{prefix:queue}:taken`, in the same script, kept
//!   [`leaseq_core::limits::FINISH_MEMORY`]; a claim drops the traces of
//!   the pairs it leases (the same claim sent again reuses its tokens).
//!   Finishing calls write no trace, so an ack pays nothing for this. Past
//!   [`keys::MAX_TAKEOVER_TRACES`] the oldest go and a floor is kept, below
//!   which a lease with no trace is answered Lost, never Finished.
//! - `enqueue_once` looks up the request's key (`{prefix:queue}:req:<id>`,
//!   in the queue's slot); when present it returns the stored results and
//!   writes nothing, else it enqueues and stores the results there with
//!   `PX` = [`leaseq_core::limits::REQUEST_MEMORY`], in the same script.
//!
//! Failures are classified by what they prove:
//! [`leaseq_core::Error::Full`] when a server at its `maxmemory` refused an
//! enqueue (`OOM`: nothing was written, see [Memory](#memory));
//! [`leaseq_core::Error::Unavailable`] when the script certainly did not
//! run (the connection was refused, no cluster node served the slot, the
//! client failed the command before writing it, or the server refused it
//! before it ran: `LOADING`, `BUSY`, `MASTERDOWN`, `READONLY`,
//! `NOSCRIPT`, `MISCONF`, `NOREPLICAS`, and `MOVED` / `ASK` / `TRYAGAIN` /
//! `CLUSTERDOWN` once no longer retried); [`leaseq_core::Error::OutcomeUnknown`]
//! when it may have run (timeouts, connections dropped after sending,
//! script runtime errors, and with [`RedisOptions::wait_for_replicas`] a
//! write fewer replicas acknowledged in time). A failed `connect` is `Unavailable`. On one
//! server the `fred` adapter hands a script to its client only while that
//! client is connected (it waits up to the connect timeout for a reconnect,
//! then fails `Unavailable`), since a command left waiting in the client's
//! buffer and then timed out could not tell whether it was written.
//!
//! # Self-healing
//! A claim or reap that meets an index entry without a record, a
//! malformed entry, or the Ready entry of an item that is Leased, Dead or
//! Scheduled (a stray, such as a racing two-step reaper leaves) removes the
//! bad entry, logs a `tracing` warning, reports a [`leaseq_core::Repair`]
//! and goes on to the next entry in the same call. A structural key of the
//! wrong type (the records hash that is not a hash, an index that is not a
//! sorted set) cannot be repaired without losing items: scripts refuse to
//! run and return [`leaseq_core::Error::Corrupt`] before writing anything.
//!
//! Poison is quarantined, never contagious. An item whose record does not
//! parse, or whose record or attempts are outside the limits the decoder
//! accepts, is moved to Dead, with the reason `quarantined: <field> holds
//! <value> (valid: ...)`, by the script
//! that meets it, in that script, and never leased: a claim reports it as
//! a [`leaseq_core::Repair`] and goes on to the healthy items behind it (a
//! claim never leases an item it does not return). The limits, one set
//! shared by the scripts and the decoder:
//! - attempts: 0 to `i32::MAX`, and at most `i32::MAX - 1` for an item
//!   that is not Dead (its next lease adds one);
//! - max attempts: 1 to `i32::MAX` ([`leaseq_core::limits::MAX_ATTEMPTS`]);
//! - priority: an `i32`;
//! - the payload present (the record has its three commas);
//!
//! each number a plain decimal integer (`"1e3"`, `"0x10"`, `"nan"` are
//! not). Where poison is met:
//! - claim (Ready items) and the promotion of due Scheduled items
//!   (claim, reap, peek, stats): quarantined, reported by claim and reap;
//! - reap (expired leases): quarantined instead of requeued;
//! - `recover_claim`: quarantined instead of returned, reported;
//! - release of a poisoned lease: quarantined, answered
//!   [`leaseq_core::Released::Dead`];
//! - `item` and `peek` never fail on poison: a Ready or Scheduled item is
//!   quarantined as a claim would do it and shown as Dead (a `peek` of
//!   Ready or Scheduled leaves it out), with its fields shown at safe values
//!   (priority 0, attempts 0, max attempts 1, payload empty) and the reason
//!   as its last error; a Leased one is shown (same safe values) and left
//!   to its lease holder (an ack still removes it; a reap quarantines it
//!   once the lease expires). Each is logged as a warning.
//! - redrive resets attempts, so an item quarantined for its attempts comes
//!   back; one whose max attempts, priority or payload is still unusable
//!   stays in Dead (stepped over, logged; `redrive_item` naming it answers
//!   [`leaseq_core::Error::Corrupt`]).
//!
//! A dedup key or failure reason that is not UTF-8 is shown lossily.
//!
//! # Listing queues
//! [`leaseq_core::Backend::queues`] reads a registry of queues (a hash at
//! `{prefix:_}:queues`, under the backend's prefix, so two prefixes never
//! see each other's queues) and counts each registered queue's items with
//! one script in the queue's own slot, concurrently (pipelined per node on
//! a cluster): its cost grows with the number of queues, and no `KEYS` or
//! `SCAN` is sent. A queue found empty is taken out of the registry on the
//! way. A queue enters the registry on its first enqueue since it was last
//! taken out: the enqueue script finds the queue unregistered, writes
//! nothing and says so, the client registers the queue and sends the
//! script again. That one extra round trip (two scripts and a registry
//! write) is paid only by the first enqueue of a queue that was empty at a
//! listing; every other enqueue is one script, as before. Why concurrent
//! enqueues, acks, purges and listings never hide a queue that holds an
//! item, nor list one that does not, is in the source (`src/listing.rs`).
//!
//! Queues written by a version without the listing have no registration:
//! they are listed from their next enqueue on, and until then only
//! `stats` (and every other call that names them) sees their items.
//!
//! Each queue keeps two small keys after it is emptied, like its id
//! counter: `{prefix:queue}:listgen` (how many times a listing took it
//! out) and, until the next listing, `{prefix:queue}:listed`.
//!
//! # Deleting a queue
//! [`leaseq_core::Admin::delete_queue`] (`leaseq purge QUEUE --forget`)
//! leaves no key of the queue but `{prefix:queue}:listgen`, raised and set
//! to expire after two minutes (it turns away an enqueue that registered
//! the queue before the delete), and `enqueue_once` records, which expire
//! on their own ([`leaseq_core::limits::REQUEST_MEMORY`]), with the
//! queue's last id (`{prefix:queue}:seq:deleted`, for as long): a resend
//! whose record predates the delete is a new request, written again. Ids stay
//! unique: before it deletes the id counter, the delete raises an id floor
//! kept next to the registry (`{prefix:_}:idfloor`, one key per prefix)
//! past the queue's last id, and a queue with no counter starts above the
//! floor. So a deleted queue's ids never come back, also for a process
//! that never saw them. Steps and races: `src/delete.rs`.
//!
//! # Waiting for work
//! Enqueue, release, reap, redrive, `redrive_item`, run now and resume push a marker onto
//! the queue's notify list (at most 32 kept); idle workers `BLPOP` it on a
//! dedicated connection. A lost marker delays work by at most the caller's poll
//! interval (the wait's timeout).
//!
//! # Redis Cluster
//! [`RedisOptions::cluster`] (a list of seed node URLs) or
//! `RedisOptions::new("redis+cluster://host:port,host:port")` connects
//! either client to a cluster: `redis` through its cluster connection,
//! `fred` as a clustered client. Every key of a queue shares the hash tag
//! `{prefix:queue}` ([`keys::KeyLayout::slot`], [`keys::key_slot`]), so each script runs
//! on one node and never meets `CROSSSLOT`.
//!
//! Redirections and migrations never run a script twice. A script is sent
//! again only after a reply that proves it did not run: `MOVED` / `ASK`
//! (the node refused it), `TRYAGAIN` (the slot is split mid-migration) and
//! `CLUSTERDOWN`. While its slot migrates a script could start on the old
//! node with some of the queue's keys already moved and fail halfway,
//! leaving a half transition; so each script's first command probes the
//! slot (a multi-key `EXISTS` of keys that never exist in this layout, which
//! the server refuses only while the slot is migrating or importing) and stops before any write with `TRYAGAIN`. A script cut off by
//! a dropped connection or a timeout may have run: it is reported as
//! [`leaseq_core::Error::OutcomeUnknown`], never sent again (the `redis` cluster
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
//! # Memory
//! The server must run `maxmemory-policy noeviction`. At its `maxmemory`
//! it then refuses new data instead of deleting keys, and:
//! - an enqueue or `enqueue_once` fails with [`leaseq_core::Error::Full`]
//!   and writes nothing: its script reads first (dedup holders, the
//!   listing, the id counter, whether the new ids are free) and its first
//!   write, the listing's or the id counter's, is the one the server
//!   refuses, before any item (a registration in the listing, when the
//!   queue needs one, is refused the same way); `enqueue_once` still
//!   answers a request it already wrote (that path only reads);
//! - the registration of a live worker is refused the same way (a
//!   listing or a deregistration of workers only deletes, and runs);
//! - every other script (claim, extend, ack, `ack_many`, release, fail,
//!   reap, redrive, `redrive_item`, `remove_item`, purge, stats, peek, item, `recover_claim`,
//!   `lease_fate`, the listing's, the Control group's: cancel, pause,
//!   snooze, run now, progress, and the events gate's) carries the Redis 7
//!   script flag `#!lua flags=allow-oom` and keeps running: none adds an
//!   item, and what they add (a token and an expiry per lease, a reason
//!   and a time per death, a wake-up marker, a listing's count of prunes, a
//!   cancel request, a progress value of at most
//!   [`leaseq_core::limits::MAX_PROGRESS_LEN`] bytes per lease, and while
//!   a queue is followed its events, a stream of bounded length) is a few
//!   bytes against
//!   the payloads acks free. Consumers drain a full server
//!   while producers get `Full`; once memory is freed, enqueues work again.
//!
//! The flags ride in the script source, so they hold for `EVALSHA` and for
//! the `EVAL` that loads a script after `NOSCRIPT`, on one server and on
//! every cluster node, with either client.
//!
//! # Checks at connect
//! `connect` ([`RedisBackend::verify_server`]) reads, on the one server or
//! every cluster master, `INFO server`, `INFO replication` and `CONFIG GET
//! maxmemory-policy appendonly appendfsync`:
//! - a server older than Redis 7.0 is refused
//!   ([`leaseq_core::Error::Unsupported`]);
//! - any `maxmemory-policy` but `noeviction` is refused with
//!   [`leaseq_core::Error::InvalidInput`] naming the node and the policy,
//!   unless [`RedisOptions::allow_eviction`]`(true)` (then a warning is
//!   logged: items can be lost or delivered twice);
//! - [`leaseq_core::Capabilities::durable`] is reported only when every
//!   node runs `appendonly yes` with `appendfsync always`, and has no
//!   replica or has writes wait for all of them (`INFO replication`,
//!   [`RedisOptions::wait_for_replicas`]); [`RedisOptions::durable`]`(false)`
//!   turns it off, it cannot turn it on.
//!
//! Where `CONFIG` is disabled, renamed or denied by an ACL the backend logs
//! a warning and connects, reporting itself not durable, and reads the
//! eviction policy from `INFO memory` (`maxmemory_policy`); where `INFO` is
//! denied too, the eviction policy is the operator's to check.
//!
//! The eviction policy is read again while running (see
//! [Persistence](#persistence-and-what-is-lost)): the reaper reads it at
//! most once per [`RedisOptions::policy_check_interval`] (10 s by default).
//!
//! # Persistence and what is lost
//! What a crash (or a failover) takes back depends on the server's
//! persistence; each lost write is lost whole (a script's effects are
//! persisted and replicated as one transaction), never half a transition.
//! Writes lost after they were acknowledged mean: items enqueued with an
//! `Ok` vanish; acked items come back and are delivered again; leases,
//! releases, failures and redrives are undone (a lease taken back expires
//! and is reaped: the item is delivered again, attempts as of the last
//! surviving write); dedup keys and `enqueue_once` records vanish (a resend
//! writes the items again); the id counter goes back (see [Ids](#ids)).
//!
//! | setting | a crash of the Redis process loses | a crash of the machine (power, kernel) loses |
//! |---|---|---|
//! | no persistence (`appendonly no`, `save ""`) | everything: every queue restarts empty | the same |
//! | RDB only (`save <seconds> <changes>`) | every write since the last snapshot (minutes, by the save rules) | the same |
//! | AOF, `appendfsync everysec` (Redis's default AOF) | nothing acknowledged (the AOF write reaches the OS before the reply), except while the disk stalls (writes then wait up to 2 s) | about the last second of acknowledged writes (up to 2 s) |
//! | AOF, `appendfsync always` | nothing acknowledged | nothing acknowledged: each script is on disk before its reply; reported as [`leaseq_core::Capabilities::durable`] |
//! | replicas and failover (Sentinel, Cluster) | see [Replicas and failover](#replicas-and-failover) | the same |
//!
//! On Redis Cluster each master is its own server in this table.
//!
//! # Replicas and failover
//! Replication is asynchronous: a master answers a script before its
//! replicas have it, so a forced failover (a replica promoted while its
//! master is gone: `CLUSTER FAILOVER TAKEOVER`, or an automatic failover
//! after the master died) loses what the promoted replica had not
//! received. A coordinated failover (`CLUSTER FAILOVER` without options,
//! Sentinel's `FAILOVER`) waits for the replica to catch up and loses
//! nothing. What a forced failover loses, per setting:
//!
//! | setting | a forced failover loses |
//! |---|---|
//! | no replica wait (the default) | every write the replica had not received (milliseconds of writes, seconds under lag), though each was answered `Ok`: enqueued items vanish, acked items are delivered again, leases and their ends are undone (see [Persistence](#persistence-and-what-is-lost)); ids are never handed out twice (see [Ids](#ids)); a lease the failover took back is reported to its worker as [`leaseq_core::Error::LeaseVanished`], except when the worker's ack was cut off by the dying master: settling then finds the lease gone before it expired and cannot tell that from an ack that landed, so it reports the ack done |
//! | [`RedisOptions::wait_for_replicas`]`(n, timeout)`, the promoted replica among the `n` | nothing answered `Ok`: each write is answered only after `n` replicas acknowledged it; a write whose wait ran out is answered [`leaseq_core::Error::OutcomeUnknown`] (maybe applied), and [`leaseq_core::settle`] finds out what became of it (the worker and `Settle::enqueue` do that) |
//! | `wait_for_replicas(n, ..)`, a replica promoted that did not acknowledge | as without the wait; automatic failover promotes the replica with the most data, so wait for every replica to rule it out |
//!
//! The wait costs a round trip to the replicas per write, and the
//! handle's connection to that node waits with it (on a cluster, per
//! master). While a replica stalls, writes wait their timeout and fail as
//! maybe applied; reads go on. A replica acknowledges a write once it is
//! in its memory, not on its disk: with `appendfsync always` on every
//! node as well, an acknowledged write survives a failover and a crash of
//! any one machine. `min-replicas-to-write` only refuses writes while too
//! few replicas are connected; it does not close the window.
//!
//! Settling after a wait that ran out reads on the same connection and
//! waits again, so what it reports as done is on the replicas too. A
//! reply lost with its connection is settled over a new one, whose wait
//! covers only writes made on it (a read that waits on a fresh connection
//! returns at once): that one case can still report a write done that a
//! failover a moment later takes back.
//!
//! [`leaseq_core::Capabilities::durable`] is reported only when every
//! master runs `appendonly yes` with `appendfsync always` and either has
//! no replica or has writes wait for all of its connected replicas
//! (checked at connect: [`RedisBackend::verify_server`]).
//!
//! `maxmemory-policy` must be `noeviction`: any evicting policy deletes
//! keys when memory runs out (items, index entries, the id counter,
//! `enqueue_once` records: `volatile-*` policies evict the records, which
//! carry a TTL), silently losing or duplicating items. It is checked at
//! connect (see [Checks at connect](#checks-at-connect)), and again while
//! running, since `CONFIG SET maxmemory-policy allkeys-lru` on a running
//! server would otherwise go unnoticed: the reaper
//! ([`leaseq_core::Backend::reap`]) reads it, on the one server or every
//! cluster master, at most once per
//! [`RedisOptions::policy_check_interval`] (10 s by default; one read per
//! interval for all clones of a backend, and no call but that reap waits
//! for it). When a node runs an evicting policy:
//! - without [`RedisOptions::allow_eviction`] an error naming the node and
//!   the policy is logged, and from then on the writes that add items
//!   (enqueue, `enqueue_once`, a schedule's fire) are refused with
//!   [`leaseq_core::Error::Unavailable`] and write nothing (retryable: the
//!   same call succeeds once the policy is fixed). Claims, acks, extends,
//!   releases, fails and reaps go on, so consumers drain the backlog. Once
//!   a read finds `noeviction` on every node the refusal lifts and an info
//!   line says so; while refused, a refused write makes a due read itself,
//!   so the refusal also lifts in a process whose reaper stopped;
//! - with `allow_eviction(true)` a change of policy is logged as a
//!   warning, once, and nothing is refused.
//!
//! A read that cannot reach the policy (`CONFIG` and `INFO` denied, a
//! timeout) changes nothing, with a warning the first time: on a server
//! that never shows its policy nothing is refused, as at connect.

// Examples in the docs compile without warnings, as users copy them; an
// example may define a function it shows without calling it.
#![doc(test(attr(deny(warnings), allow(dead_code))))]

mod backend;
mod cancel_feed;
pub mod client;
mod cluster_url;
mod control;
mod decode;
mod delete;
mod events;
mod history;
mod hooks;
pub mod keys;
mod limits;
mod listing;
mod migrate;
mod ops;
mod options;
mod prelude;
mod registry;
mod replicas;
mod reply;
mod schedules;
mod scripts;
mod server;
mod sharded;

pub use backend::RedisBackend;
#[cfg(feature = "fred")]
pub use client::FredBackend;
#[cfg(feature = "redis-rs")]
pub use client::RedisRsBackend;
pub use options::{RedisOptions, ReplicaWait};

/// The former name of [`RedisOptions`].
#[deprecated(note = "renamed `RedisOptions`, like `PgOptions` and `SqliteOptions`")]
pub type RedisConfig = RedisOptions;
pub use ops::MAX_PEEK;

// The crate's own paths to the client seam and the key layout (public in
// their modules).
pub(crate) use client::{ClientError, ScriptClient};
pub(crate) use keys::KeyLayout;
pub(crate) use reply::Reply;
pub(crate) use scripts::Script;
pub use sharded::{
    sharded_id, split_id, ShardNamer, ShardParser, Sharded, ShardedBackend, ShardedRedisBackend,
    MAX_SHARDS,
};
