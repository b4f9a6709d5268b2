//! A password planted in the backend URL is printed on no output path:
//! connect errors (refused, bad password, bad URL), `migrate`'s report,
//! the dashboard's start banner, with debug logging on, and every
//! subcommand's `--help` with the URL in `LEASEQ_BACKEND`. Each check also
//! asserts that the path quotes the URL (masked), so it cannot pass by
//! printing nothing.
#![cfg(all(feature = "redis", feature = "postgres"))]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const PLANTED: &str = "planted-Pw-8311";

/// The `leaseq` binary on `url`, logging at debug level.
fn leaseq(url: &str) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("leaseq"));
    cmd.env_remove("LEASEQ_BACKEND")
        .env("RUST_LOG", "debug")
        .args(["--backend", url]);
    cmd
}

/// `url` with `user:PLANTED@` as its userinfo (the user kept if it names
/// one, else `user`).
fn with_password(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (user, host) = match rest.split_once('@') {
        Some((user, host)) => (user.split(':').next().unwrap_or("user"), host),
        None => ("user", rest),
    };
    format!("{scheme}://{user}:{PLANTED}@{host}")
}

/// A port on which nothing listens.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Runs `cmd` and returns its stdout and stderr, checking that neither
/// holds the password.
fn output_without_password(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().expect("run leaseq");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains(PLANTED), "the password was printed:\n{all}");
    (out.status.success(), all)
}

#[test]
fn help_never_prints_the_password_from_the_environment() {
    let url = format!("postgres://app:{PLANTED}@127.0.0.1:5432/test");
    for sub in [
        &[][..],
        &["stats"],
        &["demo"],
        &["dashboard"],
        &["dead", "list"],
    ] {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("leaseq"));
        cmd.env("LEASEQ_BACKEND", &url).args(sub).arg("--help");
        let (ok, all) = output_without_password(&mut cmd);
        assert!(ok, "{sub:?} --help failed:\n{all}");
        // The option is still documented, with its variable.
        assert!(all.contains("LEASEQ_BACKEND"), "{sub:?} --help:\n{all}");
    }
}

#[test]
fn connect_errors_never_print_the_password() {
    let port = closed_port();
    let quoting = [
        // Refused connections quote the URL they tried.
        format!("redis://app:{PLANTED}@127.0.0.1:{port}"),
        // A bad URL is quoted whole.
        format!("nosuch://app:{PLANTED}@127.0.0.1:{port}"),
        format!("redis+cluster://app:{PLANTED}@"),
    ];
    for url in &quoting {
        for args in [
            &["stats", "q"][..],
            &["migrate"],
            &["dead", "list", "q", "--json"],
        ] {
            let (ok, all) = output_without_password(leaseq(url).args(args));
            assert!(!ok, "{url} {args:?}: {all}");
            assert!(
                all.contains("app:***@"),
                "{url} {args:?}: the URL is not quoted: {all}"
            );
        }
    }
    for url in [
        // The real servers, with a password they refuse (Redis) or the
        // port closed (PostgreSQL).
        with_password(&leaseq_testkit::env::redis_url()),
        format!("postgres://app:{PLANTED}@127.0.0.1:{port}/test"),
    ] {
        let (ok, all) = output_without_password(leaseq(&url).args(["stats", "q"]));
        assert!(!ok, "{url}: {all}");
        assert!(all.contains("error:"), "{url}: {all}");
    }
}

#[test]
fn migrate_and_the_dashboard_banner_mask_the_password() {
    // Trust authentication: the server accepts any password.
    let url = with_password(&leaseq_testkit::env::database_url());
    let schema = leaseq_testkit::pg_schema::SchemaGuard::fresh(
        &leaseq_testkit::env::database_url(),
        "secrets",
    );
    let (ok, all) =
        output_without_password(leaseq(&url).args(["--schema", &schema.schema, "migrate"]));
    if !leaseq_testkit::env::require_server(
        "postgres",
        &schema.url,
        if ok { Ok(()) } else { Err(&all) },
    ) {
        return;
    }
    assert!(
        all.contains(":***@"),
        "migrate does not name the URL: {all}"
    );

    let mut child = leaseq(&url)
        .args([
            "--schema",
            &schema.schema,
            "dashboard",
            "--listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the dashboard");
    let stderr = child.stderr.take().expect("stderr");
    let mut printed = String::new();
    let mut banner = None;
    for line in BufReader::new(stderr).lines() {
        let line = line.expect("read stderr");
        printed.push_str(&line);
        printed.push('\n');
        if line.contains("leaseq dashboard for") {
            banner = Some(line);
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        !printed.contains(PLANTED),
        "the password was printed:\n{printed}"
    );
    let banner = banner.unwrap_or_else(|| panic!("no banner:\n{printed}"));
    assert!(banner.contains(":***@127.0.0.1"), "{banner}");
}
