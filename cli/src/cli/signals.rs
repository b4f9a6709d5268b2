//! One stream of shutdown signals for the whole process: SIGINT (Ctrl-C)
//! and SIGTERM cancel one token, registered once at start, so a signal
//! that arrives while a command is busy is never dropped.

use leaseq::CancellationToken;

/// A token cancelled by the first SIGINT or SIGTERM (Ctrl-C elsewhere).
/// Call once, inside the runtime, before any work starts.
pub(crate) fn shutdown_token() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        cancel.cancel();
    });
    token
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // No handlers could be installed: the default action (exit) stays.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}
