//! One workload on one backend and on its primary baseline, interleaved in
//! short rounds (alternating which goes first), so that both see the same
//! load on a shared machine. Prints the median time per iteration of each
//! and the ratio. Criterion measures one for seconds, then the other; on a
//! box whose disk or cores other jobs share, that drift can swamp the
//! difference (an `fsync` costs what the neighbours' writes make it cost).
//!
//! `cargo run --release -p leaseq-benches --bin leaseq-pair -- --backend sqlite --workload life_100`

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use leaseq_benches::targets;
use leaseq_benches::Workload;
use leaseq_core::QueueName;

/// A backend and its baseline, interleaved.
#[derive(Debug, Parser)]
#[command(name = "leaseq-pair", version)]
struct Args {
    /// The backend (as in LEASEQ_BENCH_BACKENDS: memory, redis-rs, fred,
    /// postgres, sqlite).
    #[arg(long, default_value = "sqlite")]
    backend: String,
    /// The workload (enqueue_1, enqueue_100, claim_ack_1, claim_ack_100,
    /// life_1, life_100).
    #[arg(long, default_value = "life_100")]
    workload: String,
    /// Rounds; each runs both sides.
    #[arg(long, default_value_t = 60)]
    rounds: u32,
    /// Iterations per side per round.
    #[arg(long, default_value_t = 10)]
    iters: u64,
    /// The baseline by name (default: the backend's primary one; for
    /// postgres also postgres-raw-batchdel).
    #[arg(long)]
    baseline: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// What `--json` prints.
#[derive(Debug, serde::Serialize)]
struct PairReport<'a> {
    workload: &'a str,
    backend: &'a str,
    baseline: &'a str,
    rounds: u32,
    iters: u64,
    /// Median over rounds of leaseq's time per iteration.
    leaseq_us_per_iter: f64,
    /// Median over rounds of the baseline's time per iteration.
    baseline_us_per_iter: f64,
    /// Baseline time over leaseq time, of the medians: leaseq's share of
    /// the baseline's throughput.
    ratio_medians: f64,
    /// The same of the totals.
    ratio_totals: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

async fn run(args: &Args) -> Result<(), String> {
    let workload = Workload::ALL
        .into_iter()
        .find(|w| w.name() == args.workload && w.has_baseline())
        .ok_or_else(|| format!("no workload {:?} with a baseline", args.workload))?;
    let target = targets::connect(&args.backend, false)
        .await
        .map_err(|e| e.0)?;
    let raw = match &args.baseline {
        None => target.baselines.first(),
        Some(name) => target.baselines.iter().find(|b| b.name() == name),
    }
    .ok_or_else(|| {
        let names: Vec<&str> = target.baselines.iter().map(|b| b.name()).collect();
        format!(
            "{} has no baseline {:?} (it has: {})",
            args.backend,
            args.baseline.as_deref().unwrap_or("(primary)"),
            names.join(", ")
        )
    })?
    .clone();
    let queue = QueueName::new(format!("pair-{}-{}", workload.name(), std::process::id()))
        .map_err(|e| e.to_string())?;
    let backend = target.backend.backend.as_ref();
    let per_iter = |d: Duration| d.as_secs_f64() * 1e6 / args.iters as f64;
    // One untimed round each, to prepare statements and warm caches.
    workload
        .run(backend, &queue, args.iters)
        .await
        .map_err(|e| e.to_string())?;
    workload
        .run_baseline(raw.as_ref(), queue.as_str(), args.iters)
        .await
        .map_err(|e| e.to_string())?;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for round in 0..args.rounds {
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                let d = workload
                    .run(backend, &queue, args.iters)
                    .await
                    .map_err(|e| e.to_string())?;
                ours.push(per_iter(d));
            } else {
                let d = workload
                    .run_baseline(raw.as_ref(), queue.as_str(), args.iters)
                    .await
                    .map_err(|e| e.to_string())?
                    .unwrap_or_default();
                theirs.push(per_iter(d));
            }
        }
    }
    let (sum_a, sum_b): (f64, f64) = (ours.iter().sum(), theirs.iter().sum());
    let (a, b) = (median(ours), median(theirs));
    let jobs = workload.elements() as f64;
    if args.json {
        let report = PairReport {
            workload: workload.name(),
            backend: target.name,
            baseline: raw.name(),
            rounds: args.rounds,
            iters: args.iters,
            leaseq_us_per_iter: a,
            baseline_us_per_iter: b,
            ratio_medians: b / a,
            ratio_totals: sum_b / sum_a,
        };
        let line = serde_json::to_string(&report).map_err(|e| e.to_string())?;
        println!("{line}");
        return Ok(());
    }
    println!(
        "{} on {}: {} rounds of {} iterations each side, interleaved",
        workload.name(),
        target.name,
        args.rounds,
        args.iters
    );
    println!(
        "leaseq    {:>10.1} µs/iter  {:>10.0} jobs/s (median of rounds)",
        a,
        jobs * 1e6 / a
    );
    println!(
        "{:<9} {:>10.1} µs/iter  {:>10.0} jobs/s (median of rounds)",
        raw.name(),
        b,
        jobs * 1e6 / b
    );
    println!(
        "ratio     {:.0}% (medians), {:.0}% (totals)",
        100.0 * b / a,
        100.0 * sum_b / sum_a
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("leaseq-pair: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leaseq-pair: {e}");
            ExitCode::FAILURE
        }
    }
}
