//! Real signals sent to the built binary: SIGINT and SIGTERM stop the demo
//! at once, with the verdict so far, the queue removed, and exit code 130;
//! SIGINT stops one-shot commands stuck on a server that never answers, with
//! exit code 130 too.
#![cfg(unix)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn interrupted_by(signal: &str) {
    let bin = assert_cmd::cargo::cargo_bin("leaseq");
    let child = Command::new(bin)
        .env_remove("LEASEQ_BACKEND")
        .env_remove("RUST_LOG")
        .args([
            "demo",
            "--items",
            "200000",
            "--duration",
            "120",
            "--no-progress",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start leaseq");
    // Let it get going, then signal it.
    std::thread::sleep(Duration::from_millis(1_500));
    let sent = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -{signal} failed");
    let started = Instant::now();
    let out = child.wait_with_output().expect("wait for leaseq");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(130),
        "SIG{signal}: stdout {stdout}\nstderr {stderr}"
    );
    assert!(
        stderr.contains("interrupted"),
        "SIG{signal}: stderr {stderr}"
    );
    assert!(
        stdout.contains("INTERRUPTED: so far nothing lost, nothing twice"),
        "SIG{signal}: stdout {stdout}"
    );
    assert!(
        !stdout.contains("PASS"),
        "SIG{signal}: an interrupted run must not pass: {stdout}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "SIG{signal}: took {:?} to stop",
        started.elapsed()
    );
}

#[test]
fn sigint_stops_the_demo_with_130() {
    interrupted_by("INT");
}

#[test]
fn sigterm_stops_the_demo_with_130() {
    interrupted_by("TERM");
}

/// A TCP listener that accepts connections and never answers; reports
/// each accepted connection on the channel (and keeps it open).
fn silent_listener() -> (u16, std::sync::mpsc::Receiver<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
            if tx.send(()).is_err() {
                break;
            }
        }
    });
    (port, rx)
}

/// `leaseq --backend URL ARGS` against a server that never answers,
/// interrupted with SIGINT once it has connected: exit code 130, quickly.
fn one_shot_interrupted(scheme: &str, args: &[&str]) {
    let (port, accepted) = silent_listener();
    let url = match scheme {
        "postgres" => format!("postgres://postgres@127.0.0.1:{port}/test"),
        _ => format!("{scheme}://127.0.0.1:{port}"),
    };
    let bin = assert_cmd::cargo::cargo_bin("leaseq");
    let child = Command::new(bin)
        .env_remove("LEASEQ_BACKEND")
        .env_remove("RUST_LOG")
        .args(["--backend", &url])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start leaseq");
    // Connected, so its signal handlers are in place (they are installed
    // before any work starts).
    accepted
        .recv_timeout(Duration::from_secs(30))
        .expect("leaseq never connected");
    let started = Instant::now();
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -INT failed");
    let out = child.wait_with_output().expect("wait for leaseq");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{args:?} on {url}: {stderr}");
    assert!(stderr.contains("interrupted"), "{args:?}: {stderr}");
    // The client timeouts are 5 s and more: stopping sooner shows it was
    // the signal.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{args:?}: took {:?} to stop",
        started.elapsed()
    );
}

#[cfg(feature = "redis")]
#[test]
fn sigint_stops_one_shot_commands_on_a_silent_redis_with_130() {
    let commands: &[&[&str]] = &[
        &["stats", "q"],
        &["stats"],
        &["enqueue", "q", "x"],
        &["peek", "q"],
        &["dead", "redrive", "q"],
        &["migrate"],
        &["schedules", "list"],
        &["limits", "show", "q"],
    ];
    std::thread::scope(|s| {
        for args in commands {
            s.spawn(move || one_shot_interrupted("redis", args));
        }
    });
}

#[cfg(feature = "postgres")]
#[test]
fn sigint_stops_one_shot_commands_on_a_silent_postgres_with_130() {
    let commands: &[&[&str]] = &[&["stats", "q"], &["migrate"], &["purge", "q", "--yes"]];
    std::thread::scope(|s| {
        for args in commands {
            s.spawn(move || one_shot_interrupted("postgres", args));
        }
    });
}
