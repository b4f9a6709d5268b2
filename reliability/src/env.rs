//! Where the servers are, what to do when one is missing (both from
//! `leaseq-testkit`), and knobs read from the environment.

pub use leaseq_testkit::env::{database_url, in_ci, loud, redis_url, skip, tag};

/// A whole number from the environment variable `name`, else `default`.
pub fn number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// The resident set size of this process in KiB (`VmRSS`), where `/proc`
/// has it.
pub fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
