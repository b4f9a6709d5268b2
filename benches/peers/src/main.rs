//! `peers`: leaseq next to its peers and the raw servers, on one machine and
//! the same servers. Every system enqueues the same jobs in batches, then
//! drains them with the same number of consumers and a no-op handler; every
//! system runs once per round and the table gives the median of the rounds.
//! A duplicate-requeue probe then crashes consumers holding jobs, runs
//! several recoveries at once and counts deliveries per job.
//!
//! `cargo run --release -- --help` (inside `benches/peers`) lists the knobs.

mod ap;
mod common;
mod lq;
mod omni;
mod raw;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use clap::Parser;

use common::{median, ProbeReport, Rates, Settings};

/// Drain rates and a duplicate-requeue probe for leaseq, omniqueue, apalis
/// and the raw servers.
#[derive(Debug, Parser)]
#[command(name = "peers")]
struct Args {
    /// Rounds; every system runs once per round, the table gives medians.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Jobs per drain run.
    #[arg(long, default_value_t = 20_000)]
    jobs: u64,
    /// Jobs per enqueue batch.
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Producer tasks.
    #[arg(long, default_value_t = 2)]
    producers: usize,
    /// Consumers (API loops or workers); also the PostgreSQL pool size.
    #[arg(long, default_value_t = 8)]
    consumers: usize,
    /// Jobs in the duplicate-requeue probe.
    #[arg(long, default_value_t = 1_000)]
    probe_jobs: u64,
    /// Consumers that claim and crash in the probe.
    #[arg(long, default_value_t = 8)]
    probe_crashers: usize,
    /// Recoveries run at once in the probe.
    #[arg(long, default_value_t = 4)]
    probe_recoveries: usize,
    /// Skip the probe.
    #[arg(long)]
    no_probe: bool,
    /// Redis server.
    #[arg(
        long,
        env = "LEASEQ_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    redis_url: String,
    /// PostgreSQL server.
    #[arg(
        long,
        env = "LEASEQ_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/test"
    )]
    pg_url: String,
    /// apalis: each worker's poll interval, in milliseconds (apalis's
    /// default is 100).
    #[arg(long, default_value_t = 20)]
    apalis_poll_ms: u64,
    /// apalis: jobs fetched per poll (apalis's default is 10).
    #[arg(long, default_value_t = 50)]
    apalis_buffer: usize,
    /// Seconds a drain may take before the run counts as failed.
    #[arg(long, default_value_t = 180)]
    timeout_secs: u64,
    /// Only these systems (comma-separated ids; `--list` shows them).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// PostgreSQL: do not vacuum before each run, so every run meets the
    /// dead rows the runs before it left (a table churned without vacuum).
    #[arg(long)]
    no_vacuum: bool,
    /// List the systems and exit.
    #[arg(long)]
    list: bool,
    /// Where to write the markdown report.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/RESULTS.md"))]
    results: PathBuf,
    /// Print the table only; write no file.
    #[arg(long)]
    no_write: bool,
}

/// One system under measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    RedisRaw,
    RedisRawCount,
    RedisRawNagle,
    OmniStreams,
    OmniLists,
    ApalisRedis,
    LeaseqRedisRs(lq::Runtime),
    LeaseqFred(lq::Runtime),
    PgRaw,
    ApalisPostgres,
    LeaseqPg(lq::Runtime),
}

const SYSTEMS: [System; 14] = [
    System::RedisRaw,
    System::RedisRawCount,
    System::RedisRawNagle,
    System::OmniStreams,
    System::OmniLists,
    System::ApalisRedis,
    System::LeaseqRedisRs(lq::Runtime::Api),
    System::LeaseqRedisRs(lq::Runtime::Worker),
    System::LeaseqFred(lq::Runtime::Api),
    System::LeaseqFred(lq::Runtime::Worker),
    System::PgRaw,
    System::ApalisPostgres,
    System::LeaseqPg(lq::Runtime::Api),
    System::LeaseqPg(lq::Runtime::Worker),
];

impl System {
    fn id(self) -> &'static str {
        use lq::Runtime::{Api, Worker};
        match self {
            System::RedisRaw => "redis-raw",
            System::RedisRawCount => "redis-raw-count",
            System::RedisRawNagle => "redis-raw-nagle",
            System::OmniStreams => "omniqueue-streams",
            System::OmniLists => "omniqueue-lists",
            System::ApalisRedis => "apalis-redis",
            System::LeaseqRedisRs(Api) => "leaseq-redis-rs-api",
            System::LeaseqRedisRs(Worker) => "leaseq-redis-rs-worker",
            System::LeaseqFred(Api) => "leaseq-fred-api",
            System::LeaseqFred(Worker) => "leaseq-fred-worker",
            System::PgRaw => "postgres-raw",
            System::ApalisPostgres => "apalis-postgres",
            System::LeaseqPg(Api) => "leaseq-postgres-api",
            System::LeaseqPg(Worker) => "leaseq-postgres-worker",
        }
    }

    fn label(self) -> &'static str {
        use lq::Runtime::{Api, Worker};
        match self {
            System::RedisRaw => "Redis raw: pipelined `LPUSH`, `RPOP` ×8",
            System::RedisRawCount => "Redis raw: pipelined `LPUSH`, `RPOP key 10` ×8",
            System::RedisRawNagle => "Redis raw: `RPOP` ×8 with `TCP_NODELAY` off",
            System::OmniStreams => "omniqueue, Redis streams",
            System::OmniLists => "omniqueue, Redis lists",
            System::ApalisRedis => "apalis-redis",
            System::LeaseqRedisRs(Api) => "leaseq API (claim 10 + `ack_many`), Redis, redis-rs",
            System::LeaseqRedisRs(Worker) => "**leaseq `Worker`**, Redis, redis-rs",
            System::LeaseqFred(Api) => "leaseq API (claim 10 + `ack_many`), Redis, fred",
            System::LeaseqFred(Worker) => "**leaseq `Worker`**, Redis, fred",
            System::PgRaw => "PostgreSQL raw: batched `INSERT`, one-row `SKIP LOCKED` `DELETE` ×8",
            System::ApalisPostgres => "apalis-postgres (apalis-sql `PostgresStorage`)",
            System::LeaseqPg(Api) => "leaseq API (claim 10 + `ack_many`), PostgreSQL",
            System::LeaseqPg(Worker) => "**leaseq `Worker`**, PostgreSQL",
        }
    }

    fn version(self, v: &Versions) -> String {
        match self {
            System::RedisRaw | System::RedisRawCount => {
                format!(
                    "Redis {}; redis-rs {}; NODELAY on",
                    v.redis_server, v.redis1
                )
            }
            System::RedisRawNagle => {
                format!(
                    "Redis {}; redis-rs {}; NODELAY off",
                    v.redis_server, v.redis1
                )
            }
            System::OmniStreams | System::OmniLists => format!(
                "omniqueue {} (redis-rs {}, bb8-redis {}); NODELAY on",
                v.omniqueue, v.redis032, v.bb8_redis
            ),
            System::ApalisRedis => format!(
                "apalis {}, apalis-redis {} (redis-rs {}); NODELAY on",
                v.apalis, v.apalis_redis, v.redis032
            ),
            System::LeaseqRedisRs(_) => format!(
                "leaseq {} (redis-rs {}); NODELAY on (`RedisOptions::tcp_nodelay`, the default)",
                v.leaseq, v.redis1
            ),
            System::LeaseqFred(_) => format!(
                "leaseq {} (fred {}); NODELAY on (`RedisOptions::tcp_nodelay`, the default)",
                v.leaseq, v.fred
            ),
            System::PgRaw => format!("PostgreSQL {}; sqlx {}; NODELAY on", v.pg_server, v.sqlx),
            System::ApalisPostgres => format!(
                "apalis {}, apalis-sql {} (sqlx {}); NODELAY on",
                v.apalis, v.apalis_sql, v.sqlx
            ),
            System::LeaseqPg(_) => format!("leaseq {} (sqlx {}); NODELAY on", v.leaseq, v.sqlx),
        }
    }

    async fn drain(self, s: &Settings) -> Result<Rates> {
        match self {
            System::RedisRaw => raw::redis_drain(s, 1, true).await,
            System::RedisRawCount => raw::redis_drain(s, 10, true).await,
            System::RedisRawNagle => raw::redis_drain(s, 1, false).await,
            System::OmniStreams => omni::drain(true, s).await,
            System::OmniLists => omni::drain(false, s).await,
            System::ApalisRedis => ap::drain(ap::Store::Redis, s).await,
            System::LeaseqRedisRs(rt) => lq::drain(lq::Store::RedisRs, rt, s).await,
            System::LeaseqFred(rt) => lq::drain(lq::Store::Fred, rt, s).await,
            System::PgRaw => raw::pg_drain(s).await,
            System::ApalisPostgres => ap::drain(ap::Store::Postgres, s).await,
            System::LeaseqPg(rt) => lq::drain(lq::Store::Postgres, rt, s).await,
        }
    }

    /// The probe, or why it does not apply.
    async fn probe(self, s: &Settings) -> Probe {
        let run = match self {
            System::RedisRaw | System::RedisRawCount | System::RedisRawNagle => {
                return Probe::NotApplicable(
                    "n/a: no recovery; a popped job dies with its consumer",
                )
            }
            System::PgRaw => {
                return Probe::NotApplicable(
                    "n/a: no recovery; a deleted row dies with its consumer",
                )
            }
            System::LeaseqRedisRs(lq::Runtime::Worker)
            | System::LeaseqFred(lq::Runtime::Worker)
            | System::LeaseqPg(lq::Runtime::Worker) => {
                return Probe::NotApplicable("same store and `reap` as the API row above")
            }
            System::OmniStreams => omni::probe(true, s).await,
            System::OmniLists => omni::probe(false, s).await,
            System::ApalisRedis => ap::probe(ap::Store::Redis, s).await,
            System::ApalisPostgres => ap::probe(ap::Store::Postgres, s).await,
            System::LeaseqRedisRs(_) => lq::probe(lq::Store::RedisRs, s).await,
            System::LeaseqFred(_) => lq::probe(lq::Store::Fred, s).await,
            System::LeaseqPg(_) => lq::probe(lq::Store::Postgres, s).await,
        };
        match run {
            Ok(r) => Probe::Ran(r),
            Err(e) => Probe::Failed(one_line(&e)),
        }
    }
}

#[derive(Debug, Clone)]
enum Probe {
    Skipped,
    NotApplicable(&'static str),
    Ran(ProbeReport),
    Failed(String),
}

impl std::fmt::Display for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Probe::Skipped => write!(f, "not run"),
            Probe::NotApplicable(why) => write!(f, "{why}"),
            Probe::Ran(r) => write!(f, "{r}"),
            Probe::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// Versions, from this crate's lock file and the servers.
#[derive(Debug)]
struct Versions {
    leaseq: String,
    redis1: String,
    redis032: String,
    bb8_redis: String,
    fred: String,
    sqlx: String,
    omniqueue: String,
    apalis: String,
    apalis_redis: String,
    apalis_sql: String,
    redis_server: String,
    pg_server: String,
}

const LOCK: &str = include_str!("../Cargo.lock");

/// The locked version of `name` that starts with `prefix`.
fn locked(name: &str, prefix: &str) -> String {
    let mut lines = LOCK.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{name}\"") {
            if let Some(v) = lines
                .next()
                .and_then(|l| l.trim().strip_prefix("version = \""))
                .and_then(|l| l.strip_suffix('"'))
            {
                if v.starts_with(prefix) {
                    return v.to_owned();
                }
            }
        }
    }
    "?".into()
}

async fn versions(s: &Settings) -> Versions {
    let redis_server = async {
        let mut c = raw::redis_connect(&s.redis_url, true).await?;
        let info: String = redis::cmd("INFO").arg("server").query_async(&mut c).await?;
        Ok::<_, anyhow::Error>(
            info.lines()
                .find_map(|l| l.strip_prefix("redis_version:"))
                .unwrap_or("?")
                .trim()
                .to_owned(),
        )
    }
    .await
    .unwrap_or_else(|_| "?".into());
    let pg_server = async {
        let pool = raw::pg_pool(&s.pg_url, 1).await?;
        let (v,): (String,) = sqlx::query_as("SHOW server_version")
            .fetch_one(&pool)
            .await?;
        pool.close().await;
        Ok::<_, anyhow::Error>(v.split_whitespace().next().unwrap_or("?").to_owned())
    }
    .await
    .unwrap_or_else(|_| "?".into());
    Versions {
        leaseq: format!(
            "{} @ {}",
            locked("leaseq-core", ""),
            env!("LEASEQ_SOURCE_REV")
        ),
        redis1: locked("redis", "1."),
        redis032: locked("redis", "0.32"),
        bb8_redis: locked("bb8-redis", ""),
        fred: locked("fred", ""),
        sqlx: locked("sqlx", ""),
        omniqueue: locked("omniqueue", ""),
        apalis: locked("apalis", ""),
        apalis_redis: locked("apalis-redis", ""),
        apalis_sql: locked("apalis-sql", ""),
        redis_server,
        pg_server,
    }
}

/// An error on one line, short enough for a table cell.
fn one_line(e: &anyhow::Error) -> String {
    let mut s: String = format!("{e:#}")
        .chars()
        .map(|c| match c {
            '\n' | '\r' => ' ',
            '|' => '/',
            c => c,
        })
        .collect();
    if s.chars().count() > 200 {
        s = s.chars().take(200).collect::<String>() + "…";
    }
    s
}

/// Everything measured for one system.
#[derive(Debug)]
struct Row {
    system: System,
    runs: Vec<Result<Rates, String>>,
    probe: Probe,
}

fn rate(x: f64) -> String {
    let n = x.round() as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn cells(row: &Row) -> (String, String) {
    let ok: Vec<Rates> = row
        .runs
        .iter()
        .filter_map(|r| r.as_ref().ok().copied())
        .collect();
    let failed: Vec<&String> = row.runs.iter().filter_map(|r| r.as_ref().err()).collect();
    let enqueue = median(ok.iter().map(|r| r.enqueue).collect());
    let drain = median(ok.iter().map(|r| r.drain).collect());
    match (enqueue, drain, failed.first()) {
        (Some(e), Some(d), None) => (rate(e), rate(d)),
        (Some(e), Some(d), Some(why)) => (
            rate(e),
            format!(
                "{} ({} of {} runs failed: {why})",
                rate(d),
                failed.len(),
                row.runs.len()
            ),
        ),
        (_, _, Some(why)) => ("–".into(), format!("failed: {why}")),
        _ => ("–".into(), "not run".into()),
    }
}

fn table(rows: &[Row], v: &Versions) -> String {
    let mut out = String::new();
    out.push_str(
        "| system | version; client; TCP_NODELAY | enqueue, jobs/s | drain, jobs/s | duplicate-requeue probe |\n",
    );
    out.push_str("|---|---|---:|---:|---|\n");
    for row in rows {
        let (e, d) = cells(row);
        let _ = writeln!(
            out,
            "| {} | {} | {e} | {d} | {} |",
            row.system.label(),
            row.system.version(v),
            row.probe
        );
    }
    out
}

fn every_run(rows: &[Row]) -> String {
    let mut out = String::from("| system | runs: enqueue / drain, jobs/s |\n|---|---|\n");
    for row in rows {
        let runs: Vec<String> = row
            .runs
            .iter()
            .map(|r| match r {
                Ok(r) => format!("{} / {}", rate(r.enqueue), rate(r.drain)),
                Err(why) => format!("failed: {why}"),
            })
            .collect();
        let _ = writeln!(out, "| {} | {} |", row.system.id(), runs.join("; "));
    }
    out
}

fn report(args: &Args, s: &Settings, rows: &[Row], v: &Versions) -> String {
    let now = chrono::Utc::now().format("%Y-%m-%d %H:%M UTC");
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# leaseq and its peers: drain rates and a duplicate-requeue probe\n"
    );
    let _ = writeln!(out, "- Date: {now}");
    let _ = writeln!(
        out,
        "- Command (in `benches/peers`): `CARGO_TARGET_DIR=/work/target-peers cargo run --release --{}{}`",
        if argv.is_empty() { "" } else { " " },
        argv.join(" ")
    );
    let _ = writeln!(
        out,
        "- Machine: 2 cores, shared with other builds during the run."
    );
    let _ = writeln!(
        out,
        "- Servers: Redis {} at {}, PostgreSQL {} at {} ({}). Every client connects over TCP to 127.0.0.1.",
        v.redis_server,
        redact(&s.redis_url),
        v.pg_server,
        redact(&s.pg_url),
        if s.vacuum {
            "autovacuum off; every PostgreSQL run vacuums its tables first"
        } else {
            "autovacuum off and no vacuum between runs (`--no-vacuum`): every run meets the dead rows of the runs before it"
        }
    );
    let _ = writeln!(
        out,
        "- Workload: {} jobs with 16-byte payloads, enqueued in batches of {} by {} producers, then drained by {} consumers with a no-op handler. {} rounds, every system once per round; the table gives the median. Drain time runs from the first claim to the last ack.",
        s.jobs, s.batch, s.producers, s.consumers, args.rounds
    );
    let _ = writeln!(
        out,
        "- Probe: {} jobs; {} consumers claim about 80% of them and crash (drop them unacked); {} recoveries run at once with short timeouts; then a drain counts deliveries per job. Lost: never delivered after the recoveries. Duplicated: delivered more than once.\n",
        s.probe_jobs, s.probe_crashers, s.probe_recoveries
    );
    out.push_str(&table(rows, v));
    out.push_str("\n## Settings per system\n\n");
    out.push_str(&notes(s));
    out.push_str("\n## Every run\n\n");
    out.push_str(&every_run(rows));
    out
}

fn notes(s: &Settings) -> String {
    format!(
        "\
- Raw Redis: one multiplexed redis-rs connection shared by producers and consumers (as leaseq's redis-rs client does); a batch is one pipeline of {batch} `LPUSH`.
- omniqueue: a batch is {batch} `send_raw` calls in flight at once (no batch send); each consumer is built on its own (own bb8 pool of 4, own background reaper) and loops `receive_all(10, 5 ms)`, acking each delivery (no batch ack) concurrently. Streams: `XADD` / `XREADGROUP` / `XACK`+`XDEL`, reaper `XAUTOCLAIM`. Lists: `LPUSH` / `BRPOPLPUSH` (one message per call) / `LREM`, reaper `LRANGE`+`RPUSH`+`LREM`. Ack deadline 60 s in the drain, 300 ms for the probe's recoveries.
- apalis: a batch is {batch} `push` calls in flight at once (no batch push); {consumers} workers, each on its own storage, poll every {poll} ms for up to {buffer} jobs (apalis's defaults, 100 ms and 10, cap a worker at 100 jobs/s). apalis acks in the background, so the drain ends when the server shows all jobs done. Probe recovery: `reenqueue_orphaned(1000, now + 2 s)` three times from each recovery (every crashed worker counts as dead).
- leaseq: `Backend` API loops claim 10 and `ack_many`, waiting in `wait_for_work(5 ms)` when empty (as `leaseq-load --runtime api`); `Worker`s run with the builder's defaults and a no-op handler; the drain ends at the last `Acked` event. Redis key prefix and PostgreSQL schema `leaseq_peers`; PostgreSQL pool of {consumers}. Probe: claims with a 500 ms lease, then {recoveries} tasks call `Backend::reap` at once until each finds nothing.
- PostgreSQL: every system uses sqlx {sqlx} on a pool of {consumers}; sqlx sets `TCP_NODELAY` on its TCP sockets. leaseq sets `TCP_NODELAY` on both Redis clients by default (`RedisOptions::tcp_nodelay`; redis-rs 1.x and fred leave it off); the `redis-raw-nagle` row shows what Nagle costs the raw baseline.
",
        batch = s.batch,
        consumers = s.consumers,
        poll = s.apalis_poll.as_millis(),
        buffer = s.apalis_buffer,
        recoveries = s.probe_recoveries,
        sqlx = locked("sqlx", ""),
    )
}

/// A URL without its password.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme + 3],
                    &creds[..colon],
                    &url[at..]
                ),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

async fn run(args: Args) -> Result<()> {
    if args.list {
        for s in SYSTEMS {
            println!("{:24} {}", s.id(), s.label());
        }
        return Ok(());
    }
    let systems: Vec<System> = if args.only.is_empty() {
        SYSTEMS.to_vec()
    } else {
        let mut out = Vec::new();
        for id in &args.only {
            match SYSTEMS.iter().find(|s| s.id() == id.trim()) {
                Some(s) => out.push(*s),
                None => bail!("unknown system {id:?}; --list shows them"),
            }
        }
        out
    };
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let settings = Settings {
        jobs: args.jobs,
        batch: args.batch,
        producers: args.producers,
        consumers: args.consumers,
        probe_jobs: args.probe_jobs,
        probe_crashers: args.probe_crashers,
        probe_recoveries: args.probe_recoveries,
        redis_url: args.redis_url.clone(),
        pg_url: args.pg_url.clone(),
        apalis_poll: Duration::from_millis(args.apalis_poll_ms.max(1)),
        apalis_buffer: args.apalis_buffer.max(1),
        timeout: Duration::from_secs(args.timeout_secs.max(1)),
        vacuum: !args.no_vacuum,
    };
    let v = versions(&settings).await;
    let mut rows: Vec<Row> = systems
        .iter()
        .map(|&system| Row {
            system,
            runs: Vec::new(),
            probe: Probe::Skipped,
        })
        .collect();
    for round in 1..=args.rounds {
        for row in rows.iter_mut() {
            let got = row.system.drain(&settings).await;
            match &got {
                Ok(r) => eprintln!(
                    "round {round}/{}: {:24} enqueue {:>9}/s  drain {:>9}/s",
                    args.rounds,
                    row.system.id(),
                    rate(r.enqueue),
                    rate(r.drain)
                ),
                Err(e) => eprintln!(
                    "round {round}/{}: {:24} FAILED: {e:#}",
                    args.rounds,
                    row.system.id()
                ),
            }
            row.runs.push(got.map_err(|e| one_line(&e)));
        }
    }
    if !args.no_probe {
        for row in rows.iter_mut() {
            row.probe = row.system.probe(&settings).await;
            eprintln!("probe: {:24} {}", row.system.id(), row.probe);
        }
    }
    println!("{}", table(&rows, &v));
    if !args.no_write {
        let text = report(&args, &settings, &rows, &v);
        std::fs::write(&args.results, text)
            .with_context(|| format!("writing {}", args.results.display()))?;
        eprintln!("wrote {}", args.results.display());
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("peers: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("peers: {e:#}");
            ExitCode::FAILURE
        }
    }
}
