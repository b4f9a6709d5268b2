//! Where the servers are, and what to do when one is missing.

/// The Redis server under test.
pub fn redis_url() -> String {
    std::env::var("LEASEQ_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// The PostgreSQL server under test.
pub fn database_url() -> String {
    std::env::var("LEASEQ_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// True when the environment variable `CI` is `true`.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Prints `skipped: <what>: <why>` outside CI.
///
/// # Panics
/// In CI, where a missing server or binary is a failure.
pub fn skip(what: &str, why: impl std::fmt::Display) {
    let msg = format!("skipped: {what}: {why}");
    if in_ci() {
        panic!("{msg} (CI=true: a missing server is a failure)");
    }
    eprintln!("{msg}");
}

/// A whole number from the environment variable `name`, else `default`.
pub fn number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// A short random tag for prefixes, schemas and queue names.
pub fn tag() -> String {
    let t = leaseq_core::LeaseToken::random().to_string();
    t[..12].to_owned()
}

/// The resident set size of this process in KiB (`VmRSS`), where `/proc`
/// has it.
pub fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
