//! A private `redis-server` for tests that kill, restart or count the
//! commands of a server: a free loopback port and a temp data dir of its
//! own. [`PrivateRedis::start`] runs it with `appendonly yes`,
//! `appendfsync always` and `save ""`, so every acknowledged write survives
//! a SIGKILL; [`PrivateRedis::start_volatile`] with no persistence at all.
//! Dropping it kills the server and removes the dir.
//!
//! With the feature `tls`, [`PrivateRedis::start_tls`] runs a server that
//! speaks TLS only (`--port 0`, `--tls-port`), with a certificate from a
//! [`crate::tls::TestPki`]; its [`PrivateRedis::url`] is `rediss://`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ports::free_port;

/// What the server keeps on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Persistence {
    /// `appendonly yes`, `appendfsync always`, `save ""`.
    Durable,
    /// `appendonly no`, `save ""`.
    Volatile,
    /// `appendonly yes`, `appendfsync everysec`, `save ""`.
    EverySec,
}

/// One private server; killed and its dir removed when dropped.
#[derive(Debug)]
pub struct PrivateRedis {
    port: u16,
    dir: PathBuf,
    persistence: Persistence,
    /// The CA (PEM) that signed the server's certificate, when the server
    /// speaks TLS only; its files are in `dir`.
    tls_ca: Option<Vec<u8>>,
    child: Option<Child>,
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

/// [`command`] over TLS (`url` is `rediss://…`), trusting only `ca_pem`.
///
/// # Errors
/// The connection, handshake or command error, as text.
#[cfg(feature = "tls")]
pub fn command_tls(
    url: &str,
    ca_pem: &[u8],
    args: &[&str],
    timeout: Duration,
) -> Result<redis::Value, String> {
    crate::tls::install_crypto_provider();
    let certs = redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(ca_pem.to_vec()),
    };
    let client = redis::Client::build_with_tls(url, certs).map_err(|e| e.to_string())?;
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

    /// Starts a server on an append-only file fsynced once a second
    /// (`appendonly yes`, `appendfsync everysec`, `save ""`): a SIGKILL
    /// keeps what the kernel had been handed, an OS crash may lose the last
    /// second.
    ///
    /// # Errors
    /// When `redis-server` is not installed or never answers.
    pub fn start_everysec() -> Result<Self, String> {
        Self::start_with(Persistence::EverySec)
    }

    fn start_with(persistence: Persistence) -> Result<Self, String> {
        let mut s = PrivateRedis {
            port: free_port()?,
            dir: crate::env::temp_dir("leaseq-redis")?,
            persistence,
            tls_ca: None,
            child: None,
        };
        s.first_spawn()?;
        Ok(s)
    }

    /// Starts a volatile server that accepts TLS connections only (no
    /// plaintext port), presenting `pki`'s server certificate (the files
    /// are copied to the server's dir) and asking clients for none.
    ///
    /// # Errors
    /// When `redis-server` is not installed, was built without TLS, or
    /// never answers.
    #[cfg(feature = "tls")]
    pub fn start_tls(pki: &crate::tls::TestPki) -> Result<Self, String> {
        let mut s = PrivateRedis {
            port: free_port()?,
            dir: crate::env::temp_dir("leaseq-redis-tls")?,
            persistence: Persistence::Volatile,
            tls_ca: Some(pki.ca_pem().to_vec()),
            child: None,
        };
        pki.copy_to(&s.dir)?;
        s.first_spawn()?;
        Ok(s)
    }

    /// The server's URL: `rediss://127.0.0.1:<port>` for a TLS server,
    /// else `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        let scheme = if self.tls_ca.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The CA (PEM) that signed a TLS server's certificate.
    pub fn tls_ca(&self) -> Option<&[u8]> {
        self.tls_ca.as_deref()
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's data dir.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Starts the server; when it exits at once (another test's server
    /// took the port first), again on another port.
    fn first_spawn(&mut self) -> Result<(), String> {
        let mut tries = 0;
        loop {
            match self.spawn() {
                Err(e) if self.exited() && tries < 3 => {
                    crate::env::loud(&format!("redis-server on {}: {e}; another port", self.port));
                    self.port = free_port()?;
                    tries += 1;
                }
                done => return done,
            }
        }
    }

    fn spawn(&mut self) -> Result<(), String> {
        let mut cmd = Command::new("redis-server");
        let port = self.port.to_string();
        if self.tls_ca.is_some() {
            cmd.args(["--port", "0", "--tls-port", &port])
                .arg("--tls-cert-file")
                .arg(self.dir.join("server.pem"))
                .arg("--tls-key-file")
                .arg(self.dir.join("server.key"))
                .arg("--tls-ca-cert-file")
                .arg(self.dir.join("ca.pem"))
                .args(["--tls-auth-clients", "no"]);
        } else {
            cmd.args(["--port", &port]);
        }
        // `DEBUG SLEEP` and the like, from loopback clients only.
        cmd.args(["--bind", "127.0.0.1", "--enable-debug-command", "local"]);
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
            Persistence::EverySec => cmd.args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--save",
                "",
            ]),
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
            match self.command_within(&["PING"], Duration::from_millis(200)) {
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

    /// The server process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends `signal` (a name `kill` knows: `STOP`, `CONT`, …) to the
    /// server process.
    ///
    /// # Errors
    /// When the server is not running or `kill` fails.
    pub fn signal(&self, signal: &str) -> Result<(), String> {
        let pid = self.pid().ok_or("redis-server is not running")?;
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .map_err(|e| format!("kill -{signal}: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("kill -{signal} {pid}: {status}"))
        }
    }

    /// Field `field` of `INFO section`, as a number.
    pub fn info_number(&self, section: &str, field: &str) -> Option<u64> {
        let text = match self.command(&["INFO", section]).ok()? {
            redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            redis::Value::VerbatimString { text, .. } => text,
            redis::Value::SimpleString(s) => s,
            _ => return None,
        };
        let prefix = format!("{field}:");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.trim().parse().ok())
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
        self.command_within(args, Duration::from_secs(2))
    }

    /// [`PrivateRedis::command`], connecting within `timeout` (over TLS,
    /// trusting the server's CA, for a TLS server).
    fn command_within(&self, args: &[&str], timeout: Duration) -> Result<redis::Value, String> {
        #[cfg(feature = "tls")]
        if let Some(ca) = &self.tls_ca {
            return command_tls(&self.url(), ca, args, timeout);
        }
        command(&self.url(), args, timeout)
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

    #[cfg(feature = "tls")]
    #[test]
    fn a_tls_server_answers_over_tls_only() {
        let pki = crate::tls::TestPki::generate().expect("pki");
        let s = match PrivateRedis::start_tls(&pki) {
            Ok(s) => s,
            Err(e) => return crate::env::skip("a private TLS redis-server", e),
        };
        assert!(s.url().starts_with("rediss://"));
        s.command(&["SET", "k", "v"]).expect("set over TLS");
        let plain = format!("redis://127.0.0.1:{}", s.port());
        assert!(command(&plain, &["PING"], Duration::from_secs(2)).is_err());
        let stranger = command_tls(
            &s.url(),
            pki.unrelated_ca_pem(),
            &["PING"],
            Duration::from_secs(2),
        );
        assert!(stranger.is_err(), "a client trusting another CA refuses it");
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
