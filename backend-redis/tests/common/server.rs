//! Private `redis-server` processes for tests that kill or restart a server:
//! a free port, a temp data dir, `appendonly yes`, `appendfsync always`.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One private server; killed and its dir removed when dropped.
#[derive(Debug)]
pub struct PrivateServer {
    pub port: u16,
    pub dir: PathBuf,
    child: Option<Child>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl PrivateServer {
    /// Starts a server in a fresh temp dir; `None` when `redis-server` is not
    /// installed (the caller prints the skip line).
    pub fn start() -> Result<Self, String> {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "leaseq-redis-{}-{}",
            std::process::id(),
            leaseq_core::LeaseToken::random()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("temp dir: {e}"))?;
        let mut s = PrivateServer {
            port,
            dir,
            child: None,
        };
        s.spawn()?;
        Ok(s)
    }

    /// The server's URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("redis-server: {e}"))?;
        self.child = Some(child);
        self.wait_ready()
    }

    /// Waits until the server answers PING (it may be loading its AOF).
    fn wait_ready(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let client = redis::Client::open(self.url()).map_err(|e| e.to_string())?;
        loop {
            let pong: Result<String, String> = client
                .get_connection_with_timeout(Duration::from_millis(200))
                .map_err(|e| e.to_string())
                .and_then(|mut c| redis::cmd("PING").query(&mut c).map_err(|e| e.to_string()));
            match pong {
                Ok(_) => return Ok(()),
                Err(e) if self.exited() => return Err(format!("redis-server exited: {e}")),
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("server never answered: {e}"))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    fn exited(&self) -> bool {
        // A shared borrow cannot call try_wait; a dead child refuses
        // connections, which the deadline covers.
        false
    }

    /// SIGKILL: no shutdown, no final save.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same port and data dir.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        self.spawn()
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
