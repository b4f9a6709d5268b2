//! What the [`crate::suite!`] macro calls: a multi-thread runtime per check,
//! and the verdict printed or raised.

use std::future::Future;

use crate::{CheckResult, Outcome, Violation};

/// Runs `fut` to completion on a fresh multi-thread runtime with four
/// worker threads, so concurrency checks run on real parallel tasks.
///
/// # Panics
/// When the runtime cannot be built (a test harness failure).
pub fn block_on<T>(fut: impl Future<Output = T>) -> T {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build();
    match rt {
        Ok(rt) => rt.block_on(fut),
        Err(e) => panic!("cannot build a tokio runtime for the conformance check: {e}"),
    }
}

/// Turns a check's result into a test verdict: a violation panics with its
/// evidence; a skip is printed to stderr; an unavailable backend is printed
/// loudly, or panics when the environment variable `CI` is `true`.
///
/// # Panics
/// On a violation, and on an unavailable backend in CI.
#[track_caller]
pub fn conclude(check: &str, backend: &str, result: CheckResult) {
    conclude_at(check, "", backend, result);
}

/// [`conclude`], naming the check's source file in a failure.
///
/// Skips go to the process's stderr directly, past the test harness's
/// capture, so they show in a plain `cargo test` run. With
/// `LEASEQ_CONFORMANCE_STRICT=1` every skip is a failure.
///
/// # Panics
/// On a violation, on an unavailable backend in CI, and on any skip in
/// strict mode. The panic names the caller's line (the backend's own test
/// file), not this one.
#[track_caller]
pub fn conclude_at(check: &str, file: &str, backend: &str, result: CheckResult) {
    let at = if file.is_empty() {
        String::new()
    } else {
        format!(" [{file}]")
    };
    let strict = std::env::var("LEASEQ_CONFORMANCE_STRICT").is_ok_and(|v| v == "1" || v == "true");
    match result {
        Ok(Outcome::Passed) => {}
        Ok(Outcome::Skipped(reason)) => {
            let line = format!("SKIPPED {check} on {backend}: {reason}");
            if strict {
                panic!("{line}{at} (LEASEQ_CONFORMANCE_STRICT: a skip is a failure)");
            }
            loud(&line);
        }
        Ok(Outcome::Unavailable(reason)) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") || strict {
                panic!("{backend} unavailable: {reason}{at}");
            }
            loud(&format!(
                "SKIPPED: {backend} unavailable: {reason} (check {check} did not run)"
            ));
        }
        Err(v) => panic!("{}", failure_message(check, file, backend, &v)),
    }
}

/// The message [`conclude_at`] fails with for `violation`: the check, the
/// backend, the check's source file and the rule broken, then the evidence.
/// For tests that assert what the suite says about a seeded bug.
pub fn failure_message(check: &str, file: &str, backend: &str, violation: &Violation) -> String {
    let at = if file.is_empty() {
        String::new()
    } else {
        format!(" [{file}]")
    };
    format!("{check} on {backend}{at}: {violation}")
}

fn loud(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
