//! The whole conformance suite on `SqliteBackend`, each check on a fresh
//! database file of its own, on SQLite's clock.

mod common;

leaseq_conformance::suite!(common::Factory::new());
