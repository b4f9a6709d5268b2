//! The conformance suite on logical queues sharded 4 ways over SQLite with
//! the core's `Sharded` layer. Checks that need one global claim order
//! skip (chosen by the suite from `Capabilities::order`).

mod common;

leaseq_conformance::suite!(common::Factory::sharded(4));
