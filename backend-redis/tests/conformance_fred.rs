//! The whole conformance suite on the `fred` client.
#![cfg(feature = "fred")]

mod common;

leaseq_conformance::suite!(common::Factory::new(common::Which::Fred));
