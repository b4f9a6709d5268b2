//! The whole conformance suite on a local 3-master Redis Cluster, `fred`
//! client.
#![cfg(feature = "fred")]

mod common;

leaseq_conformance::suite!(common::ClusterFactory::new(common::Which::Fred));
