//! leaseq facade (placeholder)
pub use leaseq_core::*;
