//! Test support shared by the leaseq crates, with no dependency on any of
//! them: where the servers are and what to do when one is missing
//! ([`env`](mod@env)), free loopback ports for private servers
//! ([`ports`]), a private `redis-server` that tests may kill and restart
//! ([`redis_server`], feature `redis`), removal of a test's Redis keys
//! ([`redis_prefix`], feature `redis`), a PostgreSQL schema per test
//! ([`pg_schema`], feature `postgres`), a private PostgreSQL server
//! ([`pg_server`], feature `postgres`) and a throwaway certificate
//! authority for TLS tests ([`tls`], feature `tls`; with it the private
//! servers can speak TLS).
//!
//! ```
//! use leaseq_testkit::env;
//!
//! // A reachable server: the test goes on.
//! let probe: Result<(), String> = Ok(());
//! assert!(env::require_server("Redis", &env::redis_url(), probe));
//!
//! // Tags for key prefixes, schemas and queues differ on every call.
//! assert_ne!(env::tag(), env::tag());
//! ```
//!
//! An unreachable server is a loud `skipped: no <name> at <url>: <why>`
//! line on stderr, or a panic when the environment variable `CI` is `true`.

// Examples in the docs compile without warnings, as users copy them; an
// example may define a function it shows without calling it.
#![doc(test(attr(deny(warnings), allow(dead_code))))]

pub mod env;
#[cfg(feature = "postgres")]
pub mod pg_schema;
#[cfg(feature = "postgres")]
pub mod pg_server;
pub mod ports;
#[cfg(feature = "redis")]
pub mod redis_prefix;
#[cfg(feature = "redis")]
pub mod redis_server;
#[cfg(feature = "tls")]
pub mod tls;
