//! Benchmarks and a load generator for every leaseq backend, each measured
//! next to a baseline that does the same work on the same server with no
//! queue semantics, so every figure is also a ratio.
//!
//! One workload definition ([`Workload`]) runs against every backend
//! ([`targets`]) and, in the same shape, against every baseline
//! ([`baseline`]). The criterion benches (`benches/ops.rs`,
//! `benches/reap.rs`), the `leaseq-load` binary (also the cancel-to-handler
//! latency, [`cancel`], and the store's size under retention,
//! [`retention_run`]) and `leaseq-pair` (one
//! workload on a backend and its baseline, interleaved in short rounds) are
//! thin drivers over this library.
//!
//! ```
//! use leaseq_benches::{targets::MemoryFactory, Workload};
//! use leaseq_conformance::BackendFactory;
//! use leaseq_core::QueueName;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> leaseq_core::Result<()> {
//! let target = MemoryFactory::system_clock().backend().await.map_err(|u| leaseq_core::Error::invalid(u.0))?;
//! let queue = QueueName::new("doc-bench")?;
//! // Ten rounds of enqueue 100, claim 100, ack 100; only those steps are timed.
//! let timed = Workload::LifeBatch.run(target.backend.as_ref(), &queue, 10).await?;
//! assert!(timed.as_nanos() > 0);
//! # Ok(())
//! # }
//! ```
//!
//! # Backends and servers
//! Features `redis-rs`, `fred`, `postgres` and `sqlite` (all on by default)
//! compile in the other backends. Servers are found through
//! `LEASEQ_REDIS_URL` (default `redis://127.0.0.1:6379`) and
//! `LEASEQ_DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`);
//! an unreachable server skips that backend with a message. SQLite needs no
//! server: the backend and its baseline each get a file in a scratch
//! directory under the system's temp dir (`TMPDIR`), at the backend's
//! default durability (`synchronous=FULL`) unless
//! `LEASEQ_BENCH_SQLITE_SYNC=normal`. `LEASEQ_BENCH_BACKENDS`
//! (comma-separated: `memory,redis-rs,fred,postgres,sqlite`) picks which
//! backends run. Every Redis connection (backends and raw baselines alike)
//! sets `TCP_NODELAY` unless `LEASEQ_BENCH_TCP_NODELAY=off`.

pub mod await_result;
pub mod baseline;
pub mod cancel;
pub mod drain;
pub mod flatness;
pub mod load;
pub mod reap;
pub mod report;
pub mod retention_run;
pub mod rss;
pub mod store_size;
pub mod targets;
mod workload;

pub use workload::{ack_all, payload, Workload, BATCH, PAYLOAD_BYTES};
