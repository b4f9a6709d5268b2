//! One stream of shutdown signals for the whole process: SIGINT (Ctrl-C)
//! and SIGTERM cancel one token. The handlers are installed before
//! `shutdown_token` returns, so a signal that arrives once any work has
//! started is never left to the default action (which would kill the
//! process without the exit code 130).

use leaseq::CancellationToken;

/// A token cancelled by the first SIGINT or SIGTERM (Ctrl-C elsewhere).
/// Call once, inside the runtime, before any work starts.
pub(crate) fn shutdown_token() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    let signals = install();
    tokio::spawn(async move {
        signals.await;
        cancel.cancel();
    });
    token
}

/// Installs the handlers now; the future ends at the first signal.
#[cfg(unix)]
fn install() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let handlers = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        let (Ok(mut int), Ok(mut term)) = handlers else {
            // No handlers could be installed: the default action (exit) stays.
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
}

#[cfg(not(unix))]
fn install() -> impl std::future::Future<Output = ()> {
    async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
