//! The conformance suite on logical queues sharded 4 ways over one Redis
//! server with the core's `Sharded` layer, on the redis-rs client (fred
//! when it is the only one built; `cluster_sharded.rs` runs the layer on
//! fred). Each client runs the whole suite unsharded on one server and on
//! Cluster. Checks that need one global claim order skip (chosen by the
//! suite from `Capabilities::order`).
//! The reference model runs 8 sequences here, not 32: the layer itself is
//! modelled at full length over memory (`conformance/tests/memory_sharded.rs`).

mod common;

#[cfg(feature = "redis-rs")]
mod redis_rs {
    leaseq_conformance::suite!(
        super::common::Factory::sharded(super::common::Which::RedisRs, 4),
        model_cases = 8
    );
}

#[cfg(all(feature = "fred", not(feature = "redis-rs")))]
mod fred {
    leaseq_conformance::suite!(
        super::common::Factory::sharded(super::common::Which::Fred, 4),
        model_cases = 8
    );
}
