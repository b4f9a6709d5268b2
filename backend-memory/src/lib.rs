//! The leaseq conformance suite (work in progress).
