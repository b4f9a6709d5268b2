//! The whole conformance suite on a local 3-master Redis Cluster, `redis`
//! crate client.
#![cfg(feature = "redis-rs")]

mod common;

leaseq_conformance::suite!(common::ClusterFactory::new(common::Which::RedisRs));
