//! `leaseq dashboard` warns when its token guards a non-loopback address
//! over plain HTTP (the token would travel in clear without a TLS proxy),
//! and not on loopback.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const TOKEN: &str = "a-token-long-enough-1234";

/// What the dashboard prints on stderr up to its banner.
fn started_on(listen: &str) -> String {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("leaseq"))
        .env_remove("LEASEQ_BACKEND")
        .env_remove("RUST_LOG")
        .args(["--backend", "memory://", "dashboard", "--listen", listen])
        .args(["--token", TOKEN])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the dashboard");
    let stderr = child.stderr.take().expect("stderr");
    let mut printed = String::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.expect("read stderr");
        printed.push_str(&line);
        printed.push('\n');
        if line.contains("leaseq dashboard for") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        printed.contains("leaseq dashboard for"),
        "no banner:\n{printed}"
    );
    printed
}

#[test]
fn a_token_beyond_loopback_over_plain_http_is_warned_about() {
    let printed = started_on("0.0.0.0:0");
    assert!(
        printed.contains("plain HTTP") && printed.contains("Serving over TLS"),
        "{printed}"
    );
    let printed = started_on("127.0.0.1:0");
    assert!(!printed.contains("plain HTTP"), "{printed}");
}
