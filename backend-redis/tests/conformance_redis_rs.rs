//! The whole conformance suite on the `redis` crate client.
#![cfg(feature = "redis-rs")]

mod common;

leaseq_conformance::suite!(common::Factory::new(common::Which::RedisRs));
