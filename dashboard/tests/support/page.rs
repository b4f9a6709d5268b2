//! What the browser tests share: a browser (or a skip without one), a
//! Redis backend of their own (or a skip without a server), a dashboard
//! served over a backend, and waiting for an element's text and clicking.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fantoccini::{Client, Locator};
use leaseq::{Backend, CancellationToken};
use leaseq_dashboard::Dashboard;
use leaseq_testkit::env;
use leaseq_testkit::redis_prefix::PrefixGuard;

use super::browser::Browser;

/// A browser, or `None` (skipped loudly) where Chromium is missing outside
/// CI; in CI a missing browser fails the test.
pub(crate) async fn browser() -> Option<Browser> {
    match Browser::start().await {
        Ok(b) => Some(b),
        Err(why) if env::in_ci() => panic!("the dashboard browser test needs Chromium: {why}"),
        Err(why) => {
            env::skip("the dashboard browser test", why);
            None
        }
    }
}

/// A Redis backend under a key prefix of its own (`name-<tag>`), removed
/// when the guard drops; `None` (skipped loudly, a failure in CI) without a
/// server.
pub(crate) async fn redis(name: &str) -> Option<(Arc<dyn Backend>, PrefixGuard)> {
    let url = env::redis_url();
    let prefix = format!("{name}-{}", env::tag());
    let options = leaseq::ConnectOptions::new().namespace(prefix.clone());
    let backend = leaseq::connect_with(&url, &options).await;
    let probe = backend.as_ref().map(|_| ()).map_err(|e| e.to_string());
    if !env::require_server("Redis", &url, probe) {
        return None;
    }
    Some((backend.ok()?, PrefixGuard { url, prefix }))
}

/// Serves a dashboard over `backend` on a free loopback port, sampling
/// for its charts every 200 ms so they fill within a test.
pub(crate) async fn serve(backend: Arc<dyn Backend>, stop: &CancellationToken) -> String {
    let bound = Dashboard::new(backend)
        .sample_every(Duration::from_millis(200))
        .bind("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("bind");
    let base = format!("http://{}", bound.local_addr());
    tokio::spawn(bound.serve(stop.clone()));
    base
}

/// Waits until the element's text is `want`.
pub(crate) async fn wait_text(c: &Client, css: &str, want: &str) {
    wait_for(c, css, &format!("{want:?}"), |t| t == want).await;
}

/// Waits until the element's text contains `part`; returns the text.
pub(crate) async fn wait_contains(c: &Client, css: &str, part: &str) -> String {
    wait_for(c, css, &format!("text containing {part:?}"), |t| {
        t.contains(part)
    })
    .await
}

/// Waits until the element's text satisfies `ok`; returns the text.
pub(crate) async fn wait_for(
    c: &Client,
    css: &str,
    wanted: &str,
    ok: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    loop {
        if let Ok(e) = c.find(Locator::Css(css)).await {
            if let Ok(t) = e.text().await {
                if ok(&t) {
                    return t;
                }
                last = t;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{css}: wanted {wanted}, the page showed {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Finds and clicks the element, finding it again when the page's refresh
/// replaced it between the find and the click (a stale element reference).
pub(crate) async fn click(c: &Client, css: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let last = match c.find(Locator::Css(css)).await {
            Ok(e) => match e.click().await {
                Ok(_) => return,
                Err(e) => format!("clicking {css}: {e}"),
            },
            Err(e) => format!("{css} never appeared: {e}"),
        };
        assert!(Instant::now() < deadline, "{last}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
