//! The conformance suite on logical queues sharded 4 ways over SQLite with
//! the core's `Sharded` layer. Checks that need one global claim order
//! skip (chosen by the suite from `Capabilities::order`).
//! The reference model runs 8 sequences here, not 32: the layer itself is
//! modelled at full length over memory (`conformance/tests/memory_sharded.rs`).

mod common;

leaseq_conformance::suite!(common::Factory::sharded(4), model_cases = 8);
