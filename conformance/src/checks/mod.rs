//! The checks, by theme. Each is a public async function generic over a
//! [`crate::BackendFactory`], opening with the rule it proves.

pub mod basics;
pub mod batch;
pub mod clock;
pub mod collect_cost;
pub mod control;
mod cost;
pub mod dedup;
pub mod delete;
pub mod events;
pub mod fencing;
pub mod healing;
pub mod history;
pub mod history_interplay;
pub mod input;
pub mod isolation;
pub mod lifecycle;
pub mod limits;
pub mod listing;
pub mod ordering;
pub mod reap_cost;
pub mod recovery;
pub mod redrive;
pub mod registry;
pub mod remove;
pub mod replies;
pub mod schedules;
pub mod storm;
