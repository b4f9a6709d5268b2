//! Headless Chromium driven over WebDriver: a private `chromedriver` on a
//! free port. When the test ends, passed or panicked, the session is
//! deleted (the driver closes its browser) and the driver is killed.

use std::io::{Read, Write};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::process::{Child, Command};

/// Where Debian's `chromium` and `chromium-driver` packages put them.
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";

/// A browser session and the driver process behind it.
pub(crate) struct Browser {
    pub(crate) client: Client,
    /// The driver's port and the session's id, to end the session on drop.
    port: u16,
    session: Option<String>,
    _driver: Child,
}

impl Browser {
    /// Starts the driver and a headless browser, or says why it cannot:
    /// the caller skips loudly (outside CI) or fails (in CI).
    pub(crate) async fn start() -> Result<Browser, String> {
        let driver_path = std::env::var("CHROMEDRIVER").unwrap_or_else(|_| CHROMEDRIVER.into());
        let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| CHROMIUM.into());
        for path in [&driver_path, &chromium] {
            if !std::path::Path::new(path).exists() {
                return Err(format!(
                    "{path} is missing (apt-get install chromium chromium-driver)"
                ));
            }
        }
        let port = free_port()?;
        let driver = Command::new(&driver_path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {driver_path}: {e}"))?;
        let caps = serde_json::json!({
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,900"],
            }
        });
        let serde_json::Value::Object(caps) = caps else {
            return Err("capabilities are not an object".into());
        };
        let url = format!("http://127.0.0.1:{port}");
        let mut last = String::new();
        // The driver takes a moment to listen.
        for _ in 0..100 {
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(client) => {
                    let session = client.session_id().await.ok().flatten();
                    return Ok(Browser {
                        client,
                        port,
                        session,
                        _driver: driver,
                    });
                }
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!(
            "chromedriver at {url} did not start a session: {last}"
        ))
    }

    /// Saves a PNG of the page to `docs/screenshots/<name>.png`.
    pub(crate) async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("screenshot");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/screenshots");
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write screenshot");
        eprintln!("screenshot: {}", path.display());
    }
}

impl Drop for Browser {
    /// A test that panics never reaches its `close()`, and killing the
    /// driver alone leaves its Chromium running: so the session is deleted
    /// here, over the driver's own HTTP API, which closes that browser and
    /// no other. After a `close()` the call is refused, harmlessly.
    fn drop(&mut self) {
        if let Some(id) = &self.session {
            end_session(self.port, id);
        }
    }
}

/// `DELETE /session/{id}` on the driver, blocking: a drop cannot await.
fn end_session(port: u16, id: &str) {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
        return;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let request = format!(
        "DELETE /session/{id} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_ok() {
        // The reply comes once the browser is closed.
        let _ = stream.read_to_end(&mut Vec::new());
    }
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}
