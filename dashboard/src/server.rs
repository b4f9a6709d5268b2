//! The dashboard's builder, its checks before binding, and the server loop.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use leaseq_core::{Backend, CancellationToken};
use tokio::net::TcpListener;

use crate::collector::Collector;
use crate::guard::Guard;

/// A dashboard over one backend: build it, [`bind`](Self::bind) it, then
/// [`serve`](Bound::serve) it; or mount [`router`](Self::router) in an
/// application of your own.
///
/// While it runs, a collector samples every queue's counts each
/// [`sample_every`](Self::sample_every) into a history kept in memory, so
/// the page's charts show the past when it opens or reloads. The history
/// is bounded: [`history_len`](Self::history_len) samples for all queues
/// together and as many for each of the first 100 queues, 48 bytes each
/// (at most 8.7 MB at the defaults). It starts empty when the dashboard
/// starts.
///
/// A queue whose retention keeps completed items (the History group) has
/// a completion counter: each sample counts its kept Completed items that
/// finished since the previous one, and the page charts the completion
/// rate from it. Other queues have none: the page charts the net drain, a
/// lower bound, and says so.
#[derive(Clone)]
pub struct Dashboard {
    backend: Arc<dyn Backend>,
    token: Option<String>,
    every: Duration,
    samples: usize,
}

impl fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dashboard")
            .field("token", &self.token.as_ref().map(|_| "…"))
            .field("every", &self.every)
            .field("samples", &self.samples)
            .finish_non_exhaustive()
    }
}

/// Why the dashboard would not bind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BindError {
    /// A non-loopback address was asked for without a token: anyone who can
    /// reach it could purge queues.
    #[error(
        "refusing to serve the dashboard on {addr} without a token: \
         anyone who reaches it could redrive or purge; set a token \
         (--token or LEASEQ_DASHBOARD_TOKEN) or listen on 127.0.0.1"
    )]
    TokenRequired {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// A token shorter than [`Dashboard::MIN_TOKEN_LEN`].
    #[error("the dashboard token must be at least {min} characters", min = Dashboard::MIN_TOKEN_LEN)]
    WeakToken,
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Io {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl Dashboard {
    /// The shortest token accepted: a guessable token is no protection.
    pub const MIN_TOKEN_LEN: usize = 16;

    /// The collector's interval when none is set.
    pub const DEFAULT_SAMPLE_EVERY: Duration = Duration::from_secs(2);

    /// Samples kept per chart when no length is set: an hour at the
    /// default interval.
    pub const DEFAULT_HISTORY_LEN: usize = 1_800;

    /// A dashboard over `backend`, with no token (loopback only).
    pub fn new(backend: Arc<dyn Backend>) -> Self {
        Self {
            backend,
            token: None,
            every: Self::DEFAULT_SAMPLE_EVERY,
            samples: Self::DEFAULT_HISTORY_LEN,
        }
    }

    /// How often the collector samples the counts of every queue (100 ms
    /// at least). Each sample costs one `stats` call per queue, and for a
    /// queue that keeps completed items a `retention` call and a read of
    /// the items that completed since the last sample.
    #[must_use]
    pub fn sample_every(mut self, every: Duration) -> Self {
        self.every = every;
        self
    }

    /// How many samples each chart keeps (at least 1); the oldest go first.
    #[must_use]
    pub fn history_len(mut self, samples: usize) -> Self {
        self.samples = samples;
        self
    }

    /// Requires `token` on every request (see the crate docs for how a
    /// browser sends it). Needed to listen on anything but loopback. The
    /// dashboard speaks plain HTTP: beyond one machine, serve it behind a
    /// TLS proxy (see the crate docs), or the token travels in clear;
    /// [`bind`](Self::bind) logs a warning when a token guards a
    /// non-loopback address.
    #[must_use]
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The page, its assets and the JSON API, with the guards of the crate
    /// docs, to mount in an application's own server. Its collector starts
    /// now when called inside a tokio runtime (else at the first request)
    /// and stops when the router and its every clone are dropped.
    pub fn router(self) -> Router {
        let guard = Arc::new(Guard::new(self.token));
        let collector = Arc::new(Collector::new(self.every, self.samples));
        collector.start(&self.backend);
        crate::api::router(self.backend, guard, collector)
    }

    /// Checks the address against the token rule, then binds it.
    pub async fn bind(self, addr: SocketAddr) -> Result<Bound, BindError> {
        match &self.token {
            None if !addr.ip().is_loopback() => return Err(BindError::TokenRequired { addr }),
            Some(t) if t.len() < Self::MIN_TOKEN_LEN => return Err(BindError::WeakToken),
            _ => {}
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| BindError::Io { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| BindError::Io { addr, source })?;
        if self.token.is_some() && !addr.ip().is_loopback() {
            tracing::warn!(
                %local,
                "the dashboard serves plain HTTP beyond loopback: its token and pages \
                 travel unencrypted unless a TLS proxy fronts it (see \
                 docs/operations.md, \"Serving over TLS\")"
            );
        }
        Ok(Bound {
            listener,
            local,
            router: self.router(),
        })
    }
}

/// A dashboard bound to its address, ready to serve.
#[derive(Debug)]
pub struct Bound {
    listener: TcpListener,
    local: SocketAddr,
    router: Router,
}

impl Bound {
    /// The address bound (the real port when port 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves until `stop` is cancelled, then lets requests in progress
    /// finish.
    pub async fn serve(self, stop: CancellationToken) -> std::io::Result<()> {
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
    }
}
