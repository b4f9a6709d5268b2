//! Where the servers are, and the policy when one is missing: outside CI a
//! loud `skipped: …` line and the test returns; with `CI=true` a panic,
//! because a missing server there is a failure.

use std::collections::hash_map::RandomState;
use std::fmt::Display;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// The Redis server used when `LEASEQ_REDIS_URL` is unset.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// The PostgreSQL server used when `LEASEQ_DATABASE_URL` is unset.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The environment variable `var`, else `default`.
pub fn url_from(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_owned())
}

/// The Redis server under test: `LEASEQ_REDIS_URL`, else
/// [`DEFAULT_REDIS_URL`].
pub fn redis_url() -> String {
    url_from("LEASEQ_REDIS_URL", DEFAULT_REDIS_URL)
}

/// The PostgreSQL server under test: `LEASEQ_DATABASE_URL`, else
/// [`DEFAULT_DATABASE_URL`].
pub fn database_url() -> String {
    url_from("LEASEQ_DATABASE_URL", DEFAULT_DATABASE_URL)
}

/// True when the environment variable `CI` is `true`.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Prints `skipped: <what>: <why>` on stderr outside CI.
///
/// # Panics
/// In CI, where a missing server or binary is a failure.
pub fn skip(what: &str, why: impl Display) {
    let msg = format!("skipped: {what}: {why}");
    if in_ci() {
        panic!("{msg} (CI=true: a missing server is a failure)");
    }
    loud(&msg);
}

/// Writes `line` to the process's stderr directly, past the test
/// harness's output capture (which takes only `print!`/`eprint!`), so a
/// skip shows in a plain `cargo test` run.
pub fn loud(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// True when `probe` (the outcome of reaching the `name` server at `url`)
/// is `Ok`; otherwise [`skip`]s with `no <name> at <url>` and returns
/// false, so a test can `if !require_server(…) { return; }`.
///
/// # Panics
/// In CI, when `probe` is an error.
pub fn require_server<E: Display>(name: &str, url: &str, probe: Result<(), E>) -> bool {
    match probe {
        Ok(()) => true,
        Err(e) => {
            skip(&format!("no {name} at {url}"), e);
            false
        }
    }
}

/// A short random tag (12 hex digits) for key prefixes, schemas, queue
/// names and temp dirs; different on every call, in every process.
pub fn tag() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(N.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    format!("{:012x}", h.finish() >> 16)
}

/// A fresh directory under the system temp dir named
/// `<name>-<pid>-<tag>`.
///
/// # Errors
/// When it cannot be created.
pub fn temp_dir(name: &str) -> Result<std::path::PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("{name}-{}-{}", std::process::id(), tag()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("temp dir: {e}"))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_short_hex_and_distinct() {
        let a = tag();
        assert_eq!(a.len(), 12);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, tag());
    }

    #[test]
    fn a_reachable_server_is_required_without_noise() {
        assert!(require_server::<String>("Redis", "redis://x", Ok(())));
    }

    #[test]
    fn an_unreachable_server_skips_outside_ci_and_fails_in_ci() {
        let outcome =
            std::panic::catch_unwind(|| require_server("Redis", "redis://x", Err("down")));
        if in_ci() {
            assert!(outcome.is_err());
        } else {
            assert_eq!(outcome.ok(), Some(false));
        }
    }

    #[test]
    fn temp_dirs_are_fresh() {
        let a = temp_dir("leaseq-testkit").expect("temp dir");
        let b = temp_dir("leaseq-testkit").expect("temp dir");
        assert_ne!(a, b);
        assert!(a.is_dir() && b.is_dir());
        std::fs::remove_dir_all(a).expect("remove");
        std::fs::remove_dir_all(b).expect("remove");
    }
}
