//! The whole conformance suite against a real PostgreSQL server
//! (`LEASEQ_DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/test`),
//! on `PgBackend` itself: each check gets a backend in a schema of its own,
//! dropped by the factory afterwards.

mod common;

leaseq_conformance::suite!(common::Factory::new());
