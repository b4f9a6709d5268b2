//! A private PostgreSQL server for tests that need settings the shared one
//! lacks (e.g. `ssl = on` with a certificate of the test's own, and a
//! `pg_hba.conf` that refuses plaintext): `initdb` in a temp dir, a free
//! loopback port, `pg_ctl start`. Dropping it stops the server
//! (`-m immediate`) and removes the dir; a watchdog shell does the same if
//! the test process exits without dropping it.
//!
//! PostgreSQL refuses to run as root, so when the test runs as root every
//! server command runs as the `postgres` user (`runuser -u postgres --`),
//! which then owns the dir. The binaries are looked up in
//! `LEASEQ_PG_BIN`, else the newest `/usr/lib/postgresql/<version>/bin`,
//! else `PATH`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::ports::free_port;

/// How clients may connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    /// `ssl = off` and `host` lines: plaintext.
    Plain,
    /// `ssl = on` and `hostssl` lines only: plaintext TCP is refused.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    TlsOnly,
}

/// One private server; stopped and its dir removed when dropped.
#[derive(Debug)]
pub struct PrivatePostgres {
    port: u16,
    dir: PathBuf,
    bin: PathBuf,
    run_as: Option<&'static str>,
    watchdog: Option<Child>,
    running: bool,
}

/// The user that runs the server when the tests run as root.
const SERVER_USER: &str = "postgres";

/// The dir holding `initdb`, `pg_ctl` and `postgres`.
fn bin_dir() -> Result<PathBuf, String> {
    if let Ok(dir) = std::env::var("LEASEQ_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
        .ok_or_else(|| {
            "no initdb/pg_ctl (set LEASEQ_PG_BIN or install the PostgreSQL server)".to_owned()
        })
}

/// True when this process runs as root.
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl PrivatePostgres {
    /// Starts a server that accepts plaintext connections on loopback
    /// (trust authentication, superuser `postgres`).
    ///
    /// # Errors
    /// When the server binaries are missing or it does not start.
    pub fn start() -> Result<Self, String> {
        Self::start_with(Transport::Plain, |_| Ok(()))
    }

    /// Starts a server with `ssl = on`, presenting `pki`'s server
    /// certificate, whose `pg_hba.conf` has `hostssl` lines only: a
    /// connection without TLS is refused.
    ///
    /// # Errors
    /// When the server binaries are missing or it does not start.
    #[cfg(feature = "tls")]
    pub fn start_tls(pki: &crate::tls::TestPki) -> Result<Self, String> {
        Self::start_with(Transport::TlsOnly, |data| pki.copy_to(data))
    }

    /// `files` puts what the settings name (certificates) in the data dir.
    fn start_with(
        transport: Transport,
        files: impl FnOnce(&Path) -> Result<(), String>,
    ) -> Result<Self, String> {
        let bin = bin_dir()?;
        let run_as = is_root().then_some(SERVER_USER);
        let mut s = PrivatePostgres {
            port: free_port()?,
            dir: crate::env::temp_dir("leaseq-pg")?,
            bin,
            run_as,
            watchdog: None,
            running: false,
        };
        let data = s.data();
        s.give_dir()?;
        s.run(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "--auth=trust".as_ref(),
                "--no-sync".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
            ],
        )?;
        let mut conf = format!(
            "\n# leaseq-testkit\nport = {}\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{}'\nfsync = off\nmax_connections = 40\n",
            s.port,
            s.dir.display()
        );
        let hba = match transport {
            Transport::Plain => "local all all trust\nhost all all 127.0.0.1/32 trust\n",
            Transport::TlsOnly => {
                conf.push_str(
                    "ssl = on\nssl_cert_file = 'server.pem'\nssl_key_file = 'server.key'\n\
                     ssl_ca_file = 'ca.pem'\n",
                );
                "local all all trust\nhostssl all all 127.0.0.1/32 trust\n"
            }
        };
        files(&data)?;
        append(&data.join("postgresql.conf"), &conf)?;
        std::fs::write(data.join("pg_hba.conf"), hba).map_err(|e| format!("pg_hba.conf: {e}"))?;
        s.give_dir()?;
        let log = s.dir.join("server.log");
        s.start_watchdog();
        s.running = true;
        if let Err(e) = s.pg_ctl_start() {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!("{e}; server log: {tail}"));
        }
        Ok(s)
    }

    /// Stops the server in immediate mode (every backend is SIGQUIT at
    /// once, no checkpoint: crash recovery on the next start), then starts
    /// it again on the same port and data dir.
    ///
    /// # Errors
    /// When it does not stop or does not come back.
    pub fn restart_immediate(&mut self) -> Result<(), String> {
        let data = self.data();
        self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                "immediate".as_ref(),
                "-w".as_ref(),
                "stop".as_ref(),
            ],
        )?;
        self.pg_ctl_start()
    }

    /// `pg_ctl start` on the data dir, waiting up to 30 s, logging to
    /// `server.log`.
    fn pg_ctl_start(&self) -> Result<(), String> {
        let data = self.data();
        let log = self.dir.join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-w".as_ref(),
                "-t".as_ref(),
                "30".as_ref(),
                "start".as_ref(),
            ],
        )
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`, then `?` and
    /// `params` when not empty (e.g. `sslmode=require`).
    pub fn url(&self, params: &str) -> String {
        let base = format!("postgres://postgres@127.0.0.1:{}/postgres", self.port);
        if params.is_empty() {
            base
        } else {
            format!("{base}?{params}")
        }
    }

    /// The server's dir (data dir `data/`, log `server.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// Hands the dir to the server's user (when running as root).
    fn give_dir(&self) -> Result<(), String> {
        let Some(user) = self.run_as else {
            return Ok(());
        };
        let out = Command::new("chown")
            .arg("-R")
            .arg(format!("{user}:"))
            .arg(&self.dir)
            .output()
            .map_err(|e| format!("chown: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "chown {user}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// The command `program` from the server binaries, as the server's
    /// user.
    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        match self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(path);
                c
            }
            None => Command::new(path),
        }
    }

    fn run(&self, program: &str, args: &[&std::ffi::OsStr]) -> Result<(), String> {
        let out = self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .current_dir(&self.dir)
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{program} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    fn stop_command(&self) -> String {
        let pg_ctl = self.bin.join("pg_ctl");
        let prefix = match self.run_as {
            Some(user) => format!("runuser -u {user} -- "),
            None => String::new(),
        };
        format!(
            "{prefix}'{}' -D '{}' -m immediate -w stop",
            pg_ctl.display(),
            self.data().display()
        )
    }

    /// Stops the server and removes the dir once this process is gone.
    fn start_watchdog(&mut self) {
        let script = format!(
            "while kill -0 {me} 2>/dev/null; do sleep 0.3; done; {stop} >/dev/null 2>&1; rm -rf '{dir}'",
            me = std::process::id(),
            stop = self.stop_command(),
            dir = self.dir.display()
        );
        self.watchdog = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
    }
}

fn append(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(text.as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        if self.running {
            let _ = Command::new("sh")
                .args(["-c", &self.stop_command()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(url: &str) -> Result<(), String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(crate::pg_schema::probe(url))
    }

    #[test]
    fn a_private_server_answers_and_cleans_up() {
        let s = match PrivatePostgres::start() {
            Ok(s) => s,
            Err(e) => return crate::env::skip("a private PostgreSQL", e),
        };
        answers(&s.url("")).expect("the server answers");
        let dir = s.dir().to_path_buf();
        drop(s);
        assert!(!dir.exists(), "dir removed on drop");
    }

    #[cfg(feature = "tls")]
    #[test]
    fn a_tls_only_server_refuses_plaintext() {
        let pki = crate::tls::TestPki::generate().expect("pki");
        let s = match PrivatePostgres::start_tls(&pki) {
            Ok(s) => s,
            Err(e) => return crate::env::skip("a private PostgreSQL with ssl", e),
        };
        let plain = answers(&s.url("sslmode=disable"));
        assert!(plain.is_err(), "plaintext refused: {plain:?}");
    }
}
