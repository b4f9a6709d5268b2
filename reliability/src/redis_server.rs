//! A private `redis-server` for tests that kill, restart or disturb a
//! server: a free loopback port, a temp data dir, `appendonly yes`,
//! `appendfsync always`, so every write acknowledged survives a SIGKILL.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One private server; killed and its dir removed when dropped.
#[derive(Debug)]
pub struct PrivateRedis {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

impl PrivateRedis {
    /// Starts a server in a fresh temp dir and waits until it answers.
    pub fn start() -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!(
            "leaseq-rel-redis-{}-{}",
            std::process::id(),
            crate::env::tag()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("temp dir: {e}"))?;
        let mut s = PrivateRedis {
            port: free_port()?,
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
    fn wait_ready(&mut self) -> Result<(), String> {
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
                    return Err(format!("redis-server never answered: {e}"))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    fn exited(&mut self) -> bool {
        match &mut self.child {
            Some(c) => !matches!(c.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// SIGKILLs the server (no shutdown, no final save).
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

    /// Runs one command on a fresh connection: `CLIENT KILL …`,
    /// `SCRIPT FLUSH`, and the like.
    pub fn command(&self, args: &[&str]) -> Result<redis::Value, String> {
        let client = redis::Client::open(self.url()).map_err(|e| e.to_string())?;
        let mut c = client
            .get_connection_with_timeout(Duration::from_secs(2))
            .map_err(|e| e.to_string())?;
        let mut cmd = redis::cmd(args.first().copied().unwrap_or("PING"));
        for a in args.iter().skip(1) {
            cmd.arg(*a);
        }
        cmd.query(&mut c).map_err(|e| e.to_string())
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
