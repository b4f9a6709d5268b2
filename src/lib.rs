//! leaseq: a job and message queue with fenced leases and pluggable storage
//! backends.
//!
//! ```
//! use std::time::Duration;
//! use leaseq::{Backend, BackendExt, MemoryBackend, QueueName};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> leaseq::Result<()> {
//! let backend = MemoryBackend::new();
//! let queue = QueueName::new("emails")?;
//!
//! backend.push(&queue, "welcome mail for #42").await?;
//! let lease = backend.claim_one(&queue, Duration::from_secs(30)).await?.expect("an item");
//! assert_eq!(lease.payload, "welcome mail for #42");
//! backend.ack(&lease.key).await?; // only this lease's token can ack
//! assert_eq!(backend.stats(&queue).await?.total(), 0);
//! # Ok(())
//! # }
//! ```
//!
//! Most programs run a [`Worker`] instead of claiming by hand: it claims in
//! batches, keeps leases alive with heartbeats, retries failures with
//! backoff, reaps expired leases, and shuts down gracefully. Typed jobs go
//! through [`TypedQueue`] and [`WorkerBuilder::build_typed`].
//!
//! # The contract in short
//! An item is Ready, Scheduled, Leased or Dead; ack removes it. A claim
//! hands out a lease under a fresh token, and only that token can ack,
//! extend, release or fail the item: a worker that outlived its lease gets
//! [`Error::LeaseLost`] and changes nothing. Expired leases are recovered by
//! reapers, any number at once, each lease exactly once. Delivery is
//! at-least-once, so handlers should be idempotent.
//!
//! # Backends and features
//! | feature | backend | URL |
//! |---|---|---|
//! | `memory` (default) | `leaseq::memory::MemoryBackend`, in-process | `memory://` |
//! | `redis` | `leaseq::redis::RedisRsBackend`, on the `redis` crate | `redis://host:6379`, `rediss://…` |
//! | `fred` | `leaseq::redis::FredBackend`, on the `fred` crate | `redis://…` (when `redis` is off) |
//! | `postgres` | `leaseq::postgres::PgBackend` (sqlx) | `postgres://user@host/db` |
//! | `sqlite` | `leaseq::sqlite::SqliteBackend` (sqlx), embedded | `sqlite://path/to/jobs.db`, `sqlite::memory:` |
//!
//! `cron` adds cron expressions and time zones to periodic jobs
//! ([`schedule::Schedule::cron`]); interval schedules need no feature.
//! `faults` adds `leaseq::layer::fault`, a layer that injects faults.
//!
//! [`connect`] turns a backend URL into an `Arc<dyn Backend>`, so one
//! program runs on any backend compiled in.

// Examples in the docs compile without warnings, as users copy them; an
// example may define a function it shows without calling it.
#![doc(test(attr(deny(warnings), allow(dead_code))))]

pub use leaseq_core::*;

#[cfg(feature = "memory")]
#[doc(inline)]
pub use leaseq_memory as memory;
#[cfg(feature = "memory")]
pub use leaseq_memory::MemoryBackend;

#[cfg(feature = "postgres")]
#[doc(inline)]
pub use leaseq_postgres as postgres;
#[cfg(any(feature = "redis", feature = "fred"))]
#[doc(inline)]
pub use leaseq_redis as redis;
#[cfg(feature = "sqlite")]
#[doc(inline)]
pub use leaseq_sqlite as sqlite;

mod connect;

pub use connect::{connect, connect_with, BackendUrl, ConnectError, ConnectOptions};

/// The README's Rust examples, compiled as doc tests so they stay true.
#[cfg(all(doctest, feature = "memory"))]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

/// docs/guide.md's Rust examples, compiled as doc tests.
#[cfg(all(doctest, feature = "memory"))]
#[doc = include_str!("../docs/guide.md")]
struct GuideExamples;

/// The Rust examples of the other pages in docs/ (none today; a block
/// added there is compiled from then on).
#[cfg(all(doctest, feature = "memory"))]
#[doc = include_str!("../docs/production.md")]
#[doc = include_str!("../docs/operations.md")]
#[doc = include_str!("../docs/testing.md")]
#[doc = include_str!("../docs/performance.md")]
struct DocsExamples;

#[cfg(test)]
mod readme_tests {
    /// Where the metrics and traces are documented.
    const OPERATIONS: &str = include_str!("../docs/operations.md");

    /// The text of docs/operations.md's section `heading` (e.g.
    /// `"### Metrics"`), up to the next heading of its level or above.
    fn section(heading: &str) -> &'static str {
        let start = OPERATIONS
            .find(&format!("\n{heading}\n"))
            .unwrap_or_else(|| panic!("docs/operations.md has no {heading:?}"));
        let rest = &OPERATIONS[start + heading.len() + 2..];
        let level = heading.find(' ').unwrap_or(heading.len());
        let end = rest
            .match_indices('\n')
            .map(|(i, _)| i + 1)
            .find(|&i| {
                let hashes = rest[i..].chars().take_while(|&c| c == '#').count();
                (1..=level).contains(&hashes) && rest[i + hashes..].starts_with(' ')
            })
            .unwrap_or(rest.len());
        &rest[..end]
    }

    #[test]
    fn the_metrics_table_lists_every_metric_name_once() {
        let listed: Vec<&str> = section("### Metrics")
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .collect();
        for name in crate::metric_names::ALL {
            let n = listed.iter().filter(|l| *l == name).count();
            assert_eq!(n, 1, "{name} is in the metrics table {n} times");
        }
        for name in &listed {
            assert!(
                crate::metric_names::ALL.contains(name),
                "the metrics table lists {name}, which is no metric name"
            );
        }
    }

    #[test]
    fn the_traces_section_names_every_span_field() {
        let traces = section("### Traces");
        for field in crate::spans::fields::ALL {
            assert!(
                traces.contains(&format!("`{field}`")),
                "the Traces section does not name {field}"
            );
        }
    }

    /// README stays a guide a newcomer reads through: short, with what
    /// they need first; detail lives in docs/.
    #[test]
    fn the_readme_is_a_short_guide_with_what_a_newcomer_needs() {
        let readme = include_str!("../README.md");
        let lines = readme.lines().count();
        assert!(
            lines <= 300,
            "README.md has {lines} lines (at most 300): move detail into docs/"
        );
        for needed in [
            "## Quickstart",
            "## Connecting to a real backend",
            "leaseq::connect(",
            "## Installing the tool",
            // .ci/run runs the same command.
            "cargo test --workspace --all-features",
            "cargo doc --open",
            "(docs/production.md)",
            "(docs/operations.md)",
            "(docs/testing.md)",
            "(docs/performance.md)",
            "(benches/RESULTS.md)",
        ] {
            assert!(readme.contains(needed), "README.md lacks {needed:?}");
        }
    }
}
