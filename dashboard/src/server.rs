//! The dashboard's builder, its checks before binding, and the server loop.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use leaseq_core::{Backend, CancellationToken};
use tokio::net::TcpListener;

use crate::guard::Guard;

/// A dashboard over one backend: build it, [`bind`](Self::bind) it, then
/// [`serve`](Bound::serve) it; or mount [`router`](Self::router) in an
/// application of your own.
#[derive(Clone)]
pub struct Dashboard {
    backend: Arc<dyn Backend>,
    token: Option<String>,
}

impl fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dashboard")
            .field("token", &self.token.as_ref().map(|_| "…"))
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

    /// A dashboard over `backend`, with no token (loopback only).
    pub fn new(backend: Arc<dyn Backend>) -> Self {
        Self {
            backend,
            token: None,
        }
    }

    /// Requires `token` on every request (see the crate docs for how a
    /// browser sends it). Needed to listen on anything but loopback.
    #[must_use]
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The page, its assets and the JSON API, with the guards of the crate
    /// docs, to mount in an application's own server.
    pub fn router(self) -> Router {
        let guard = Arc::new(Guard::new(self.token));
        crate::api::router(self.backend, guard)
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
