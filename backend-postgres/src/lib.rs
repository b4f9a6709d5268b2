//! A PostgreSQL backend for leaseq (placeholder docs, written below).

mod backend;
mod hooks;
mod notify;
mod ops;
mod options;
mod rows;
mod sql;

pub use backend::PgBackend;
pub use options::PgOptions;
pub use sqlx::postgres::{PgConnectOptions, PgPool};
