//! A web dashboard for any leaseq backend: every queue with its counts per
//! state and charts over time, items by state in pages with their times
//! and payloads, an item found by id, dead letters with redrive and purge,
//! control of running work (pause and resume a queue, cancel an item, run
//! a Scheduled item now, a job's progress) and the live workers. The page
//! talks to a JSON API under `/api`, which other tools may use too.
//!
//! The charts draw a history the server keeps: a collector samples every
//! queue's counts at an interval ([`Dashboard::sample_every`]) into a
//! bounded window ([`Dashboard::history_len`]), so a page that opens or
//! reloads shows the past, on a time axis.
//!
//! ```
//! use std::sync::Arc;
//! use leaseq_core::{Backend, CancellationToken};
//! use leaseq_dashboard::Dashboard;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let backend: Arc<dyn Backend> = Arc::new(leaseq_memory::MemoryBackend::new());
//! // Loopback needs no token; any other address refuses to start without one.
//! let bound = Dashboard::new(backend).bind("127.0.0.1:0".parse()?).await?;
//! println!("dashboard at http://{}", bound.local_addr());
//! let stop = CancellationToken::new();
//! stop.cancel(); // a real program cancels it on Ctrl-C
//! bound.serve(stop).await?;
//! # Ok(()) }
//! ```
//!
//! # Safe by default
//! - [`Dashboard::bind`] refuses a non-loopback address unless a token is
//!   set ([`Dashboard::token`]); with a token every request must carry it
//!   (a cookie set by opening `/?token=…` once, or `Authorization: Bearer`).
//! - Without a token, requests must name a loopback host (`Host:
//!   127.0.0.1:…`, `localhost:…`, `[::1]:…`), so a web page elsewhere cannot
//!   reach the dashboard through DNS rebinding.
//! - Every action that changes the store is a `POST` (or `DELETE`) with a
//!   JSON body, the page's CSRF token in the `x-csrf-token` header and,
//!   when the browser sends one, an `Origin` of this dashboard; the
//!   destructive ones (purge, remove, cancel, pause, run all now) ask for
//!   confirmation on the page first.
//! - Payloads travel as text or hex inside JSON and the page only ever sets
//!   them as text; a strict Content-Security-Policy forbids inline scripts.
//!   Previews are cut at [`LIST_PREVIEW`] bytes in lists and
//!   [`ITEM_PREVIEW`] bytes on an item's page.
//! - A backend error is a JSON error with its kind, shown on the page.
//!
//! # Beyond one machine
//! The dashboard speaks plain HTTP. With a token, put a TLS proxy in
//! front of it (docs/operations.md has nginx and Caddy examples) so that
//! the token and the pages travel encrypted; the proxy must pass the
//! browser's `Host` on (the CSRF check compares it with `Origin`) and
//! may send `X-Forwarded-Proto: https`, which keeps the login cookie to
//! HTTPS. [`Dashboard::bind`] logs a warning when a token guards a
//! non-loopback address.

// Examples in the docs compile without warnings, as users copy them; an
// example may define a function it shows without calling it.
#![doc(test(attr(deny(warnings), allow(dead_code))))]

mod answer;
mod api;
mod app;
mod assets;
mod collector;
mod completions;
mod control;
mod guard;
mod history;
mod kept;
mod kept_view;
mod paging;
mod server;
mod view;

pub use server::{BindError, Bound, Dashboard};
pub use view::{ITEM_PREVIEW, LIST_PREVIEW};
