//! What the [`crate::suite!`] macro calls: a multi-thread runtime per check,
//! and the verdict printed or raised.

use std::future::Future;

use crate::{CheckResult, Outcome};

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
pub fn conclude(check: &str, backend: &str, result: CheckResult) {
    match result {
        Ok(Outcome::Passed) => {}
        Ok(Outcome::Skipped(reason)) => eprintln!("SKIPPED {check} on {backend}: {reason}"),
        Ok(Outcome::Unavailable(reason)) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{backend} unavailable in CI: {reason}");
            }
            eprintln!("SKIPPED: {backend} unavailable: {reason} (check {check} did not run)");
        }
        Err(v) => panic!("{check} on {backend}: {v}"),
    }
}
