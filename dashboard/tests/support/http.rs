//! Plain HTTP against a dashboard: one request per connection, as the API
//! tests send them, and the CSRF token the page carries.

use std::net::SocketAddr;
use std::sync::Arc;

use leaseq::layer::LayeredBackend;
use leaseq::{
    Backend, CancellationToken, ClaimSpec, Groups, Lease, MemoryBackend, NewItem, QueueName,
};
use leaseq_dashboard::Dashboard;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A reply: status, head and body as text.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) head: String,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then_some(v.trim())
        })
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// One HTTP/1.1 request with the given extra header lines.
pub(crate) async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &str,
) -> Reply {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("host:"))
    {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).await.expect("write");
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.expect("read");
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Reply {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// A memory backend whose queue `jobs` holds `n` items, `item 0` on.
pub(crate) async fn with_items(n: usize) -> (Arc<dyn Backend>, QueueName) {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let q = QueueName::new("jobs").expect("queue");
    let items = (0..n).map(|i| NewItem::new(format!("item {i}"))).collect();
    backend.enqueue(&q, items).await.expect("enqueue");
    (backend, q)
}

/// Serves a dashboard over `backend` on a free loopback port, with
/// `token` if given.
pub(crate) async fn start(
    backend: Arc<dyn Backend>,
    token: Option<&str>,
) -> (SocketAddr, CancellationToken) {
    let mut d = Dashboard::new(backend);
    if let Some(t) = token {
        d = d.token(t);
    }
    serve(d).await
}

/// Serves `dashboard` on a free loopback port until the token is cancelled.
pub(crate) async fn serve(dashboard: Dashboard) -> (SocketAddr, CancellationToken) {
    let bound = dashboard
        .bind("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("bind");
    let addr = bound.local_addr();
    let stop = CancellationToken::new();
    tokio::spawn(bound.serve(stop.clone()));
    (addr, stop)
}

/// The CSRF token the page carries.
pub(crate) async fn csrf(addr: SocketAddr, headers: &[&str]) -> String {
    let page = send(addr, "GET", "/", headers, "").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let start = page
        .body
        .find("name=\"csrf-token\" content=\"")
        .expect("meta")
        + 27;
    page.body[start..]
        .split('"')
        .next()
        .expect("token")
        .to_owned()
}

/// Sends a JSON POST with the page's CSRF token (or without it).
pub(crate) struct Writer {
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) csrf: String,
}

impl Writer {
    pub(crate) async fn post(&self, path: &str, body: &str) -> Reply {
        let token = format!("x-csrf-token: {}", self.csrf);
        let headers = ["Content-Type: application/json", token.as_str()];
        send(self.addr, "POST", path, &headers, body).await
    }

    pub(crate) async fn post_without_csrf(&self, path: &str, body: &str) -> Reply {
        send(
            self.addr,
            "POST",
            path,
            &["Content-Type: application/json"],
            body,
        )
        .await
    }
}

/// Serves a dashboard over `backend` and a writer that holds its CSRF token.
pub(crate) async fn writer(backend: Arc<dyn Backend>) -> (Writer, CancellationToken) {
    let (addr, stop) = start(backend, None).await;
    let csrf = csrf(addr, &[]).await;
    (Writer { addr, csrf }, stop)
}

/// Memory with only the Admin group (no Control, WorkerRegistry or
/// History), as a backend of one's own may be.
#[derive(Debug)]
pub(crate) struct AdminOnly(pub(crate) MemoryBackend);

impl LayeredBackend for AdminOnly {
    type Inner = MemoryBackend;

    fn inner(&self) -> &MemoryBackend {
        &self.0
    }

    fn groups(&self) -> Groups<'_> {
        Groups::none().admin(&self.0)
    }
}

/// Claims one item of `queue` for a minute; panics when none is Ready.
pub(crate) async fn claim_one(backend: &dyn Backend, queue: &QueueName) -> Lease {
    let spec = ClaimSpec::new(1, std::time::Duration::from_secs(60)).expect("spec");
    let mut leases = backend.claim(queue, spec).await.expect("claim").leases;
    assert!(!leases.is_empty(), "nothing to claim in {queue}");
    leases.remove(0)
}
