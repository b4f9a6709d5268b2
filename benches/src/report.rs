//! Turns criterion's saved estimates into the results tables, with every
//! backend's throughput as a fraction of its baseline's.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::reap::{EXPIRED, LIVE};
use crate::targets::ALL;
use crate::Workload;

/// Criterion's output folder: `CRITERION_HOME`, else
/// `$CARGO_TARGET_DIR/criterion`, else the workspace's `target/criterion`.
pub fn criterion_dir() -> PathBuf {
    if let Ok(home) = std::env::var("CRITERION_HOME") {
        return PathBuf::from(home);
    }
    if let Ok(target) = std::env::var("CARGO_TARGET_DIR") {
        return Path::new(&target).join("criterion");
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/criterion")
}

/// The median time of one iteration, in nanoseconds, of bench
/// `group/id`, if criterion saved one.
pub fn median_ns(dir: &Path, group: &str, id: &str) -> Option<f64> {
    let path = dir.join(group).join(id).join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("median")?.get("point_estimate")?.as_f64()
}

/// Items per second for `elements` items per iteration.
fn per_sec(elements: u64, ns: f64) -> f64 {
    elements as f64 * 1e9 / ns
}

fn fmt_rate(r: f64) -> String {
    let r = r.round() as u64;
    let s = r.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn fmt_time(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.1} µs", ns / 1e3)
    }
}

/// The operation table: one row per workload and backend, with the
/// primary baseline's rate and the ratio (and the other baselines', if any).
pub fn operations_table(dir: &Path) -> String {
    let mut out = String::from(
        "| workload | backend | time / iter | leaseq jobs/s | baseline | baseline jobs/s | ratio |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for w in Workload::ALL {
        for backend in ALL {
            let Some(ns) = median_ns(dir, w.name(), backend) else {
                continue;
            };
            let rate = per_sec(w.elements(), ns);
            let mut baselines = Vec::new();
            for raw in baseline_ids(backend) {
                if let Some(bns) = median_ns(dir, w.name(), raw) {
                    baselines.push((raw, per_sec(w.elements(), bns)));
                }
            }
            if baselines.is_empty() {
                let _ = writeln!(
                    out,
                    "| {} | {backend} | {} | {} | – | – | – |",
                    w.name(),
                    fmt_time(ns),
                    fmt_rate(rate)
                );
            }
            for (raw, brate) in baselines {
                let _ = writeln!(
                    out,
                    "| {} | {backend} | {} | {} | {raw} | {} | {:.0}% |",
                    w.name(),
                    fmt_time(ns),
                    fmt_rate(rate),
                    fmt_rate(brate),
                    100.0 * rate / brate
                );
            }
        }
    }
    out
}

/// The baseline bench ids compared with `backend`.
pub fn baseline_ids(backend: &str) -> &'static [&'static str] {
    match backend {
        "memory" => &["memory-raw"],
        "redis-rs" => &["redis-rs-raw"],
        "fred" => &["fred-raw"],
        "postgres" => &["postgres-raw", "postgres-raw-batchdel"],
        "sqlite" => &["sqlite-raw"],
        _ => &[],
    }
}

/// The reap group's name.
pub fn reap_group() -> String {
    format!("reap_{EXPIRED}_expired")
}

/// The reap table: one row per backend, one column per live-lease count,
/// and the ratio of the largest to the smallest.
pub fn reap_table(dir: &Path) -> String {
    let group = reap_group();
    let mut out = String::from("| backend |");
    for n in LIVE {
        let _ = write!(out, " {} live |", fmt_rate(n as f64));
    }
    out.push_str(" largest / smallest |\n|---|");
    for _ in 0..=LIVE.len() {
        out.push_str("---|");
    }
    out.push('\n');
    for backend in ALL {
        let times: Vec<Option<f64>> = LIVE
            .iter()
            .map(|n| median_ns(dir, &group, &format!("{backend}/{n}")))
            .collect();
        if times.iter().all(Option::is_none) {
            continue;
        }
        let _ = write!(out, "| {backend} |");
        for t in &times {
            let _ = write!(out, " {} |", t.map(fmt_time).unwrap_or_else(|| "–".into()));
        }
        match (
            times.first().copied().flatten(),
            times.last().copied().flatten(),
        ) {
            (Some(a), Some(b)) => {
                let _ = writeln!(out, " {:.2}x |", b / a);
            }
            _ => out.push_str(" – |\n"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_grouped_by_thousands() {
        assert_eq!(fmt_rate(1_234_567.4), "1,234,567");
        assert_eq!(fmt_rate(999.0), "999");
        assert_eq!(fmt_time(1_500.0), "1.5 µs");
        assert_eq!(fmt_time(2_500_000.0), "2.50 ms");
    }

    #[test]
    fn tables_read_saved_estimates() {
        let dir = std::env::temp_dir().join(format!("leaseq-report-{}", std::process::id()));
        let save = |group: &str, id: &str, ns: f64| {
            let d = dir.join(group).join(id).join("new");
            std::fs::create_dir_all(&d).expect("mkdir");
            let json = format!("{{\"median\":{{\"point_estimate\":{ns}}}}}");
            std::fs::write(d.join("estimates.json"), json).expect("write");
        };
        save("life_100", "memory", 100_000.0);
        save("life_100", "memory-raw", 50_000.0);
        save(&reap_group(), "memory/100", 1_000.0);
        save(&reap_group(), "memory/100000", 1_500.0);
        let ops = operations_table(&dir);
        assert!(
            ops.contains(
                "| life_100 | memory | 100.0 µs | 1,000,000 | memory-raw | 2,000,000 | 50% |"
            ),
            "{ops}"
        );
        let reap = reap_table(&dir);
        assert!(
            reap.contains("| memory | 1.0 µs | – | 1.5 µs | 1.50x |"),
            "{reap}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
