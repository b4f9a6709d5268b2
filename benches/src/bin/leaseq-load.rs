//! Load generator: P producers and C consumers against one backend for a
//! fixed time; prints jobs/s, enqueue-to-ack latency (with workers also
//! enqueue-to-start) and peak memory.
//!
//! `cargo run --release -p leaseq-benches --bin leaseq-load -- --url redis://127.0.0.1:6379 -p 2 -c 8 -d 10`
//!
//! `--cancel 200 --lanes 8` measures instead how long a running handler
//! takes to see its cancellation (see `leaseq_benches::cancel`), and
//! `--await 500 --await-rate 50` how long a producer waits for a job's
//! result (see `leaseq_benches::await_result`). `--steady-retention 10
//! --rate 200 --keep-age 60` runs ten minutes at a steady rate with
//! completed items kept for a minute and reads the store's size as it
//! goes (see `leaseq_benches::retention_run`).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use leaseq_benches::await_result::{self, AwaitConfig, AwaitReport};
use leaseq_benches::cancel::{self, CancelConfig, CancelReport};
use leaseq_benches::drain::{self, DrainConfig, DrainReport, Runtime};
use leaseq_benches::load::{self, LoadConfig, LoadReport};
use leaseq_benches::retention_run::{self, SteadyConfig, SteadyReport};
use leaseq_benches::store_size;
use leaseq_benches::targets::NAMESPACE;
use leaseq_conformance::BackendFactory;
use leaseq_core::{Backend, QueueName};

/// Which Redis client crate to drive a `redis://` URL with.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum RedisClient {
    /// The `redis` crate.
    RedisRs,
    /// The `fred` crate.
    Fred,
}

/// Producers and consumers against one leaseq backend for a fixed time.
#[derive(Debug, Parser)]
#[command(name = "leaseq-load", version)]
struct Args {
    /// Backend URL: memory://, redis://host:port, redis+cluster://h:p,h:p,
    /// postgres://user@host/db (claims durable unless
    /// LEASEQ_BENCH_PG_DURABLE_CLAIMS=off), sqlite:///path/to/file.db (created if
    /// missing; `synchronous=FULL` unless LEASEQ_BENCH_SQLITE_SYNC=normal).
    #[arg(long, default_value = "memory://")]
    url: String,
    /// Client crate for redis:// and redis+cluster:// URLs.
    #[arg(long, value_enum, default_value = "redis-rs")]
    client: RedisClient,
    /// Redis only: spread the queue over this many physical queues (shards).
    #[arg(long, default_value_t = 1)]
    shards: u16,
    /// Producer tasks.
    #[arg(short, long, default_value_t = 2)]
    producers: usize,
    /// Consumer tasks.
    #[arg(short, long, default_value_t = 4)]
    consumers: usize,
    /// Seconds to run.
    #[arg(short, long, default_value_t = 10.0)]
    duration: f64,
    /// Items per enqueue call.
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Items per claim (API loops; default 100, 10 in drain mode) or the
    /// workers' prefetch (default: the worker's own).
    #[arg(long)]
    prefetch: Option<u32>,
    /// Jobs per second over all producers (default: as fast as the backlog
    /// allows; 200 in steady retention mode); a light rate such as 100
    /// measures latency.
    #[arg(long)]
    rate: Option<f64>,
    /// Producers pause while this many items are enqueued but not acked.
    #[arg(long, default_value_t = 2_000)]
    max_backlog: u64,
    /// Payload size in bytes (at least 8).
    #[arg(long, default_value_t = 16)]
    payload_bytes: usize,
    /// Lease length in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    lease_ms: u64,
    /// Queue name (purged before and after the run).
    #[arg(long, default_value = "leaseq-load")]
    queue: String,
    /// Redis key prefix and PostgreSQL schema.
    #[arg(long, default_value = NAMESPACE)]
    namespace: String,
    /// Runtime worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Drain mode: enqueue this many jobs first, then time how fast the
    /// consumers drain them (instead of producers and consumers together).
    #[arg(long)]
    drain: Option<u64>,
    /// How consumers take jobs: `api` loops of claim + ack_many, or
    /// `worker`s (the runtime users run) with a no-op handler.
    #[arg(long, value_enum, default_value = "api")]
    runtime: Runtime,
    /// Worker runtime only: handler slots per worker (default: the
    /// worker's default).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Cancel mode: this many times, enqueue one item to a default worker
    /// whose handler waits on its cancellation, cancel it once the handler
    /// started, and time until the handler sees it (`--lease-ms` is the
    /// worker's ttl; its heartbeat is a third of it).
    #[arg(long)]
    cancel: Option<u32>,
    /// Cancel mode: cancel at points spread over one heartbeat interval
    /// after the handler started, not right after it.
    #[arg(long)]
    spread: bool,
    /// Cancel mode: samples taken at once, each on its own item (1 to 8).
    #[arg(long, default_value_t = 1)]
    lanes: usize,
    /// Await mode: this many jobs, enqueued at `--rate` per second, each
    /// awaited by its producer with `wait_finished` until its result is
    /// back (the queue keeps completed items for the run).
    #[arg(long = "await")]
    await_jobs: Option<u32>,
    /// Await mode: jobs enqueued per second.
    #[arg(long, default_value_t = 50.0)]
    await_rate: f64,
    /// Steady retention mode: run this many minutes at `--rate` jobs per
    /// second (default 200) with a default worker that completes each job
    /// with a small result, completed items kept for `--keep-age`, and
    /// read the store's size every `--sample-every` (use a fresh queue,
    /// and on PostgreSQL a fresh `--namespace`: the bytes are the whole
    /// tables').
    #[arg(long)]
    steady_retention: Option<f64>,
    /// Steady retention mode: seconds completed items are kept.
    #[arg(long, default_value_t = 60.0)]
    keep_age: f64,
    /// Steady retention mode: also keep at most this many completed items.
    #[arg(long)]
    keep_count: Option<u64>,
    /// Steady retention mode: seconds between readings of the store.
    #[arg(long, default_value_t = 10.0)]
    sample_every: f64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.threads {
        rt.worker_threads(n.max(1));
    }
    let rt = match rt.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("leaseq-load: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(&args)) {
        Ok(Report::Load(report)) => {
            print(&report, args.json);
            ExitCode::SUCCESS
        }
        Ok(Report::Drain(report)) => {
            print_drain(&report, args.json);
            ExitCode::SUCCESS
        }
        Ok(Report::Cancel(report)) => {
            print_cancel(&report, args.json);
            ExitCode::SUCCESS
        }
        Ok(Report::Await(report)) => {
            print_await(&report, args.json);
            ExitCode::SUCCESS
        }
        Ok(Report::Steady(report)) => {
            print_steady(&report, args.json);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("leaseq-load: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What a run printed.
enum Report {
    Load(LoadReport),
    Drain(DrainReport),
    Cancel(CancelReport),
    Await(AwaitReport),
    Steady(SteadyReport),
}

async fn run(args: &Args) -> Result<Report, String> {
    if !(args.duration.is_finite() && args.duration > 0.0) {
        return Err("--duration must be a positive number of seconds".into());
    }
    if args.shards != 1 && !args.url.to_ascii_lowercase().starts_with("redis") {
        return Err("--shards applies to Redis URLs only".into());
    }
    let (name, backend) = connect(&args.url, args.client, args.shards, &args.namespace).await?;
    let queue = QueueName::new(&args.queue).map_err(|e| e.to_string())?;
    if let Some(minutes) = args.steady_retention {
        return steady(args, minutes, name, backend, &queue).await;
    }
    if let Some(jobs) = args.await_jobs {
        let config = AwaitConfig {
            jobs,
            rate: args.await_rate,
        };
        return await_result::run(name, backend, &queue, &config)
            .await
            .map(Report::Await)
            .map_err(|e| e.to_string());
    }
    if let Some(cancels) = args.cancel {
        let config = CancelConfig {
            cancels,
            lanes: args.lanes,
            lease: Duration::from_millis(args.lease_ms),
            spread: args.spread,
        };
        return cancel::run(name, backend, &queue, &config)
            .await
            .map(Report::Cancel)
            .map_err(|e| e.to_string());
    }
    if let Some(jobs) = args.drain {
        let config = DrainConfig {
            jobs,
            batch: args.batch,
            producers: args.producers,
            consumers: args.consumers,
            prefetch: args.prefetch,
            concurrency: args.concurrency,
            runtime: args.runtime,
            lease: Duration::from_millis(args.lease_ms),
        };
        return drain::run(name, backend, &queue, &config)
            .await
            .map(Report::Drain)
            .map_err(|e| e.to_string());
    }
    let config = LoadConfig {
        producers: args.producers,
        consumers: args.consumers,
        duration: Duration::from_secs_f64(args.duration),
        batch: args.batch,
        prefetch: args.prefetch,
        runtime: args.runtime,
        concurrency: args.concurrency,
        rate: args.rate,
        max_backlog: args.max_backlog,
        payload_bytes: args.payload_bytes,
        lease: Duration::from_millis(args.lease_ms),
    };
    load::run(name, backend, &queue, &config)
        .await
        .map(Report::Load)
        .map_err(|e| e.to_string())
}

/// Steady retention mode (see `leaseq_benches::retention_run`).
async fn steady(
    args: &Args,
    minutes: f64,
    name: &'static str,
    backend: Arc<dyn Backend>,
    queue: &QueueName,
) -> Result<Report, String> {
    let secs = |s: f64, what: &str| {
        Duration::try_from_secs_f64(s)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("{what} must be a positive number"))
    };
    if args.shards != 1 {
        return Err("--steady-retention reads one physical queue: no --shards".into());
    }
    let config = SteadyConfig {
        duration: secs(minutes * 60.0, "--steady-retention")?,
        rate: args.rate.unwrap_or(200.0),
        keep_age: secs(args.keep_age, "--keep-age")?,
        max_count: args.keep_count,
        sample_every: secs(args.sample_every, "--sample-every")?,
        payload_bytes: args.payload_bytes,
    };
    let store = store_size::connect(name, &args.url, &args.namespace, queue)
        .await
        .map_err(|e| e.to_string())?;
    retention_run::run(name, backend, queue, store.as_ref(), &config)
        .await
        .map(Report::Steady)
        .map_err(|e| e.to_string())
}

async fn connect(
    url: &str,
    client: RedisClient,
    shards: u16,
    namespace: &str,
) -> Result<(&'static str, Arc<dyn Backend>), String> {
    let scheme = url
        .split("://")
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    // `sqlite::memory:` and `sqlite:jobs.db` have no `//`.
    let scheme = if scheme.starts_with("sqlite:") {
        "sqlite".to_owned()
    } else {
        scheme
    };
    let got = match scheme.as_str() {
        "memory" => Ok((
            "memory",
            leaseq_benches::targets::MemoryFactory::system_clock()
                .backend()
                .await,
        )),
        "redis" | "rediss" | "redis+cluster" => redis(url, client, shards, namespace).await,
        "postgres" | "postgresql" => postgres(url, namespace).await,
        "sqlite" => sqlite(url).await,
        other => Err(format!(
            "unknown scheme {other:?}: use memory://, redis://, redis+cluster://, postgres:// \
             or sqlite://"
        )),
    }?;
    match got {
        (name, Ok(tb)) => Ok((name, tb.backend)),
        (name, Err(why)) => Err(format!("{name}: {}", why.0)),
    }
}

type Got = (
    &'static str,
    Result<leaseq_conformance::TestBackend, leaseq_conformance::Unavailable>,
);

async fn redis(
    url: &str,
    client: RedisClient,
    shards: u16,
    namespace: &str,
) -> Result<Got, String> {
    #[cfg(any(feature = "redis-rs", feature = "fred"))]
    let config = leaseq_redis::RedisOptions::new(url).prefix(namespace);
    let unavailable = |e: leaseq_core::Error| leaseq_benches::targets::no_server("Redis", url, e);
    match client {
        #[cfg(feature = "redis-rs")]
        RedisClient::RedisRs => Ok((
            "redis-rs",
            match leaseq_redis::RedisRsBackend::connect(config).await {
                Ok(b) => sharded(b, shards),
                Err(e) => Err(unavailable(e)),
            },
        )),
        #[cfg(feature = "fred")]
        RedisClient::Fred => Ok((
            "fred",
            match leaseq_redis::FredBackend::connect(config).await {
                Ok(b) => sharded(b, shards),
                Err(e) => Err(unavailable(e)),
            },
        )),
        #[allow(unreachable_patterns)]
        other => {
            let _ = (url, shards, namespace, unavailable);
            Err(format!("built without the {other:?} client feature"))
        }
    }
}

/// One Redis backend, or `shards` physical queues per logical queue on it.
#[cfg(any(feature = "redis-rs", feature = "fred"))]
fn sharded<C: leaseq_redis::client::ScriptClient>(
    b: leaseq_redis::RedisBackend<C>,
    shards: u16,
) -> Result<leaseq_conformance::TestBackend, leaseq_conformance::Unavailable> {
    let backend: Arc<dyn Backend> = if shards > 1 {
        let sharded = leaseq_redis::ShardedBackend::new(b, shards)
            .map_err(|e| leaseq_conformance::Unavailable(e.to_string()))?;
        Arc::new(sharded)
    } else {
        Arc::new(b)
    };
    Ok(leaseq_conformance::TestBackend::real(backend))
}

/// The handle an application gets (no test hooks), in schema `namespace`.
async fn postgres(url: &str, namespace: &str) -> Result<Got, String> {
    #[cfg(feature = "postgres")]
    {
        let durable = leaseq_benches::targets::pg_durable_claims().map_err(|e| e.0)?;
        let options = leaseq_postgres::PgOptions::new()
            .schema(namespace)
            .max_connections(leaseq_benches::targets::PG_CONNECTIONS)
            .durable_claims(durable);
        Ok((
            "postgres",
            match leaseq_postgres::PgBackend::connect(url, options).await {
                Ok(b) => Ok(leaseq_conformance::TestBackend::real(Arc::new(b))),
                Err(e) => Err(leaseq_benches::targets::no_server("PostgreSQL", url, e)),
            },
        ))
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = (url, namespace);
        Err("built without the `postgres` feature".into())
    }
}

async fn sqlite(url: &str) -> Result<Got, String> {
    #[cfg(feature = "sqlite")]
    {
        let durability = leaseq_benches::targets::sqlite_durability().map_err(|e| e.0)?;
        let url = url.to_owned();
        Ok((
            "sqlite",
            leaseq_benches::targets::SqliteFactory { url, durability }
                .backend()
                .await,
        ))
    }
    #[cfg(not(feature = "sqlite"))]
    {
        let _ = url;
        Err("built without the `sqlite` feature".into())
    }
}

/// One report as one line of JSON.
fn print_json(r: &impl serde::Serialize) {
    match serde_json::to_string(r) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("leaseq-load: cannot encode the report: {e}"),
    }
}

fn print(r: &LoadReport, json: bool) {
    if json {
        return print_json(r);
    }
    println!("backend      {}", r.backend);
    println!(
        "workers      {} producers, {} consumers ({:?}); batch {}, prefetch {}",
        r.producers,
        r.consumers,
        r.runtime,
        r.batch,
        r.prefetch.map_or("default".to_string(), |k| k.to_string())
    );
    println!(
        "ran          {:.1} s: {} enqueued, {} acked",
        r.seconds, r.enqueued, r.acked
    );
    println!("throughput   {:.0} jobs/s", r.jobs_per_sec);
    println!(
        "latency      p50 {} µs, p99 {} µs, max {} µs (enqueue to ack)",
        r.latency.p50_us, r.latency.p99_us, r.latency.max_us
    );
    if let Some(start) = &r.start_latency {
        println!(
            "start        p50 {} µs, p90 {} µs, p99 {} µs, max {} µs (enqueue to handler start)",
            start.p50_us, start.p90_us, start.p99_us, start.max_us
        );
    }
    match r.peak_rss_bytes {
        Some(b) => println!("peak memory  {:.1} MiB", b as f64 / (1024.0 * 1024.0)),
        None => println!("peak memory  unknown (no /proc/self/status)"),
    }
}

fn print_await(r: &AwaitReport, json: bool) {
    if json {
        return print_json(r);
    }
    println!("backend      {}", r.backend);
    println!(
        "jobs         {} at {}/s, each awaited with wait_finished (default worker)",
        r.jobs, r.rate
    );
    println!(
        "latency      p50 {} µs, p99 {} µs, max {} µs (enqueue to result)",
        r.latency.p50_us, r.latency.p99_us, r.latency.max_us
    );
    println!(
        "results      {} of {} as the handler set them, in {:.1} s",
        r.results_right, r.jobs, r.seconds
    );
}

fn print_cancel(r: &CancelReport, json: bool) {
    if json {
        return print_json(r);
    }
    println!("backend      {}", r.backend);
    println!(
        "worker       lease ttl {} ms, heartbeat {} ms; {} cancels, {} at once, {}",
        r.lease_ttl_ms,
        r.heartbeat_ms,
        r.cancels,
        r.lanes,
        if r.spread {
            "spread over an interval after the start"
        } else {
            "right after the start"
        }
    );
    println!(
        "latency      p50 {} µs, p99 {} µs, max {} µs (cancel call to handler)",
        r.latency.p50_us, r.latency.p99_us, r.latency.max_us
    );
    println!(
        "within       {} of {} within one heartbeat interval (the slowest {} µs past it); \
         cancel call p50 {} µs",
        r.within_heartbeat, r.cancels, r.max_over_heartbeat_us, r.cancel_call_p50_us
    );
    println!(
        "ended        {} items Cancelled by the worker, in {:.1} s",
        r.ended_cancelled, r.seconds
    );
}

fn print_drain(r: &DrainReport, json: bool) {
    if json {
        return print_json(r);
    }
    println!("backend      {}", r.backend);
    println!(
        "drained      {} jobs with {} consumers ({:?})",
        r.jobs, r.consumers, r.runtime
    );
    println!("enqueue      {:.0} jobs/s", r.enqueue_per_sec);
    println!(
        "drain        {:.0} jobs/s ({:.2} s)",
        r.drain_per_sec, r.drain_seconds
    );
}

fn print_steady(r: &SteadyReport, json: bool) {
    if json {
        return print_json(r);
    }
    println!("backend      {}", r.backend);
    println!(
        "policy       completed kept {} s{}; the worker's reaper collects every {} s",
        r.keep_age_s,
        r.max_count
            .map_or(String::new(), |n| format!(", at most {n}")),
        r.collect_every_s
    );
    println!(
        "load         {} jobs/s for {:.0} s: {} enqueued, {} completed with a result",
        r.rate, r.seconds, r.enqueued, r.completed
    );
    println!("measures     {}", r.measures);
    let extras: Vec<&str> = r
        .samples
        .first()
        .map(|s| s.size.extra.keys().copied().collect())
        .unwrap_or_default();
    print!(
        "{:>7} {:>9} {:>9} {:>8} {:>8} {:>12}",
        "t (s)", "enqueued", "completed", "in queue", "kept", "bytes"
    );
    for name in &extras {
        print!(" {name:>16}");
    }
    println!();
    for s in &r.samples {
        print!(
            "{:>7.0} {:>9} {:>9} {:>8} {:>8} {:>12}",
            s.t_s, s.enqueued, s.completed, s.in_queue, s.size.kept, s.size.bytes
        );
        for name in &extras {
            print!(" {:>16}", s.size.extra.get(name).copied().unwrap_or(0));
        }
        println!();
    }
    let show = |what: &str, t: &Option<leaseq_benches::flatness::Trend>| {
        match t {
        Some(t) => println!(
            "{what:<12} from {:.0} s: min {}, max {} (max/min {:.2}), fitted line moved {:+.1}% of the mean: {}",
            r.window_from_s,
            t.min,
            t.max,
            t.ratio,
            t.drift * 100.0,
            if t.is_flat() { "flat" } else { "NOT flat" }
        ),
        None => println!("{what:<12} too few samples after {:.0} s", r.window_from_s),
    }
    };
    show("kept", &r.kept);
    show("bytes", &r.bytes);
    println!("verdict      {}", if r.flat { "flat" } else { "NOT flat" });
}
