//! A private `redis-server` for tests that kill, restart or count the
//! commands of a server: a free loopback port and a temp data dir of its
//! own. [`PrivateRedis::start`] runs it with `appendonly yes`,
//! `appendfsync always` and `save ""`, so every acknowledged write survives
//! a SIGKILL; [`PrivateRedis::start_volatile`] with no persistence at all.
//! Dropping it kills the server and removes the dir.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What the server keeps on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Persistence {
    /// `appendonly yes`, `appendfsync always`, `save ""`.
    Durable,
    /// `appendonly no`, `save ""`.
    Volatile,
}

/// One private server; killed and its dir removed when dropped.
#[derive(Debug)]
pub struct PrivateRedis {
    port: u16,
    dir: PathBuf,
    persistence: Persistence,
    child: Option<Child>,
}

/// A loopback port nobody listens on right now.
///
/// # Errors
/// When the OS hands out none.
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// Runs one command (`args[0]` and its arguments; `PING` when empty) on a
/// fresh connection to `url`, connecting within `timeout`.
///
/// # Errors
/// The connection or command error, as text.
pub fn command(url: &str, args: &[&str], timeout: Duration) -> Result<redis::Value, String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut c = client
        .get_connection_with_timeout(timeout)
        .map_err(|e| e.to_string())?;
    let mut cmd = redis::cmd(args.first().copied().unwrap_or("PING"));
    for a in args.iter().skip(1) {
        cmd.arg(*a);
    }
    cmd.query(&mut c).map_err(|e| e.to_string())
}

impl PrivateRedis {
    /// Starts a durable server (`appendonly yes`, `appendfsync always`,
    /// `save ""`) in a fresh temp dir and waits until it answers.
    ///
    /// # Errors
    /// When `redis-server` is not installed or never answers.
    pub fn start() -> Result<Self, String> {
        Self::start_with(Persistence::Durable)
    }

    /// Starts a server that keeps nothing on disk (`appendonly no`,
    /// `save ""`) and waits until it answers.
    ///
    /// # Errors
    /// When `redis-server` is not installed or never answers.
    pub fn start_volatile() -> Result<Self, String> {
        Self::start_with(Persistence::Volatile)
    }

    fn start_with(persistence: Persistence) -> Result<Self, String> {
        let mut s = PrivateRedis {
            port: free_port()?,
            dir: crate::env::temp_dir("leaseq-redis")?,
            persistence,
            child: None,
        };
        s.spawn()?;
        Ok(s)
    }

    /// The server's URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's data dir.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    fn spawn(&mut self) -> Result<(), String> {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"]);
        match self.persistence {
            Persistence::Durable => cmd.args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
            ]),
            Persistence::Volatile => cmd.args(["--appendonly", "no", "--save", ""]),
        };
        let child = cmd
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
        loop {
            match command(&self.url(), &["PING"], Duration::from_millis(200)) {
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
    ///
    /// # Errors
    /// When it does not come back.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        self.spawn()
    }

    /// Runs one command on a fresh connection: `CLIENT KILL …`,
    /// `SCRIPT FLUSH`, and the like.
    ///
    /// # Errors
    /// The connection or command error, as text.
    pub fn command(&self, args: &[&str]) -> Result<redis::Value, String> {
        command(&self.url(), args, Duration::from_secs(2))
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_durable_server_keeps_a_write_through_sigkill_and_cleans_up() {
        let mut s = match PrivateRedis::start() {
            Ok(s) => s,
            Err(e) => return crate::env::skip("a private redis-server", e),
        };
        s.command(&["SET", "k", "v"]).expect("set");
        s.kill();
        assert!(s.command(&["PING"]).is_err(), "killed");
        s.restart().expect("restart");
        let v = s.command(&["GET", "k"]).expect("get");
        assert_eq!(v, redis::Value::BulkString(b"v".to_vec()));
        let dir = s.dir().to_path_buf();
        drop(s);
        assert!(!dir.exists(), "dir removed on drop");
    }

    #[test]
    fn a_volatile_server_keeps_nothing() {
        let mut s = match PrivateRedis::start_volatile() {
            Ok(s) => s,
            Err(e) => return crate::env::skip("a private redis-server", e),
        };
        s.command(&["SET", "k", "v"]).expect("set");
        s.restart().expect("restart");
        assert_eq!(s.command(&["GET", "k"]).expect("get"), redis::Value::Nil);
    }
}
