//! Real signals sent to the built binary: SIGINT and SIGTERM stop the demo
//! at once, with the verdict so far, the queue removed, and exit code 130.
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
