//! The conformance suite on `sqlite::memory:`: one connection, no file.

mod common;

leaseq_conformance::suite!(common::Factory::memory());
