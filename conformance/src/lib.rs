//! The leaseq conformance suite (work in progress).
mod harness;
pub use harness::{BackendFactory, TestBackend, TimeControl, Unavailable};
