//! A fragile downstream API, protected by a global rate limit: jobs call a
//! flaky HTTP endpoint (a stub in this program that fails one call in
//! four), and two worker processes share a limit of 5 calls per second set
//! on the queue, in the backend. Failed calls are retried, and retries
//! count against the limit too, so the endpoint never sees more than the
//! limit however many workers run. The program prints the rate the
//! endpoint measured.
//!
//! ```text
//! cargo run -p leaseq --example rate_limited --features redis       # redis://127.0.0.1:6379
//! LEASEQ_BACKEND=postgres://postgres@127.0.0.1:5432/test \
//!   cargo run -p leaseq --example rate_limited --features postgres
//! ```
//!
//! The program is both processes: it starts the stub and one worker, and
//! runs itself again (`--worker`) as the second worker process. The limit
//! is in fixed windows of the backend's clock, so the endpoint (on this
//! machine's clock) may see up to twice the limit within a second that
//! straddles two windows, never more than the limit per window.

use leaseq::BackendExt as _;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leaseq::{
    handler_fn, Backend, CancellationToken, Job, JobContext, NewItem, QueueLimits, QueueName, Rate,
    RetryPolicy, Worker,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const JOBS: usize = 30;
const PER_SECOND: u32 = 5;

fn backend_url() -> String {
    std::env::var("LEASEQ_BACKEND").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("--worker") => {
            let (Some(queue), Some(addr)) = (args.get(2), args.get(3)) else {
                return Err("usage: rate_limited --worker QUEUE HOST:PORT".into());
            };
            let backend = leaseq::connect(&backend_url()).await?;
            let done = work(backend, QueueName::new(queue.as_str())?, addr.clone()).await?;
            println!("{done}");
            Ok(())
        }
        _ => coordinate().await,
    }
}

/// Starts the stub, fills the queue, sets the limit, runs one worker here
/// and one in a child process, and reports what the endpoint saw.
async fn coordinate() -> Result<(), BoxError> {
    let url = backend_url();
    if url.starts_with("memory") || url.contains(":memory:") {
        return Err(
            "the two workers are two processes: name a shared backend in LEASEQ_BACKEND \
                    (redis://… or postgres://…)"
                .into(),
        );
    }
    let backend = leaseq::connect(&url).await?;
    let queue = QueueName::new(format!("rate-limited-{}", std::process::id()))?;
    let rate = Rate::new(PER_SECOND, Duration::from_secs(1))?;
    backend
        .throttles()?
        .set_queue_limits(&queue, QueueLimits::NONE.rate(rate))
        .await?;
    let items = (0..JOBS)
        .map(|i| NewItem::new(format!("charge {i}")))
        .collect();
    backend.enqueue(&queue, items).await?;

    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    let calls: Arc<Mutex<Vec<(Duration, String)>>> = Arc::default();
    tokio::spawn(serve(listener, calls.clone()));
    println!("{JOBS} jobs on {url}, limited to {rate} across two worker processes");

    // The second worker process: this program again. It stops once the
    // queue is empty, also when this process gives up and purges it.
    let child = std::process::Command::new(std::env::current_exe()?)
        .args(["--worker", queue.as_str(), &addr])
        .env("LEASEQ_BACKEND", &url)
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let waiting = tokio::task::spawn_blocking(move || child.wait_with_output());
    let here = work(backend.clone(), queue.clone(), addr).await;
    if here.is_err() {
        let _ = backend.admin()?.purge(&queue).await;
    }
    let out = waiting.await??;
    let there = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let _ = backend
        .throttles()?
        .set_queue_limits(&queue, QueueLimits::NONE)
        .await;
    let _ = backend.admin()?.purge(&queue).await;
    let here = here?;
    if !out.status.success() {
        return Err(format!("the second worker process failed: {}", out.status).into());
    }

    let calls = calls
        .lock()
        .map_err(|_| "the stub's log was poisoned")?
        .clone();
    let (Some(first), Some(last)) = (calls.first(), calls.last()) else {
        return Err("the endpoint saw no calls".into());
    };
    // Calls per second of this machine's clock (the windows are the
    // backend's: on a server on this machine, the same seconds).
    let mut per_second: BTreeMap<u64, u32> = BTreeMap::new();
    let mut per_process: BTreeMap<&str, u32> = BTreeMap::new();
    for (at, who) in &calls {
        *per_second
            .entry(at.as_secs() - first.0.as_secs())
            .or_default() += 1;
        *per_process.entry(who.as_str()).or_default() += 1;
    }
    let seconds = last.0.as_secs() - first.0.as_secs() + 1;
    let busiest = per_second.values().copied().max().unwrap_or(0);
    println!("jobs done: {here} in this process, {there} in the other");
    println!("calls per worker process: {per_process:?}");
    println!("calls per second at the endpoint: {per_second:?}");
    // A rate over the whole run counts a partly used first and last
    // window as whole ones; the limit is per window, so that is the figure.
    println!(
        "measured: {} calls (retries included) over {seconds} s; the busiest second had {busiest} \
         (limit {rate})",
        calls.len(),
    );
    if busiest > PER_SECOND {
        println!(
            "(more than the limit in one second of this machine's clock: the backend's windows \
             are on its own clock, so a second here may straddle two of them)"
        );
    }
    Ok(())
}

/// One worker process: runs jobs until the queue is empty; returns how many
/// it finished.
async fn work(backend: Arc<dyn Backend>, queue: QueueName, addr: String) -> Result<u64, BoxError> {
    let me = format!("pid {}", std::process::id());
    let worker = Worker::builder(backend.clone(), queue.as_str())
        .concurrency(8)
        .retry(
            RetryPolicy::exponential(Duration::from_millis(200)).max_delay(Duration::from_secs(1)),
        )
        .build(handler_fn(move |job: Job, _ctx: JobContext| {
            let (addr, me) = (addr.clone(), me.clone());
            async move { call(&addr, &me, &job.payload).await }
        }))?;
    let metrics = worker.metrics();
    let stop = CancellationToken::new();
    let running = tokio::spawn(worker.run(stop.clone()));
    while backend.stats(&queue).await?.total() > 0 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.cancel();
    running.await??;
    Ok(metrics.snapshot().acked)
}

/// One call to the endpoint; a 5xx is an error, so the job is retried.
async fn call(addr: &str, me: &str, payload: &[u8]) -> Result<(), BoxError> {
    let mut stream = TcpStream::connect(addr).await?;
    let body = String::from_utf8_lossy(payload);
    let request = format!(
        "POST /charge HTTP/1.1\r\nHost: {addr}\r\nX-Worker: {me}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await?;
    let status = reply.split_whitespace().nth(1).unwrap_or("000");
    if status.starts_with('2') {
        Ok(())
    } else {
        Err(format!("the endpoint answered {status}").into())
    }
}

/// The flaky endpoint: answers every fourth call with 503, the rest with
/// 200, and logs when each call came and from which worker process.
async fn serve(listener: TcpListener, calls: Arc<Mutex<Vec<(Duration, String)>>>) {
    let mut n = 0u64;
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        n += 1;
        let fail = n.is_multiple_of(4);
        let calls = calls.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let Ok(len) = stream.read(&mut buf).await else {
                return;
            };
            let head = String::from_utf8_lossy(&buf[..len]);
            let who = head
                .lines()
                .find_map(|l| l.strip_prefix("X-Worker: "))
                .unwrap_or("unknown")
                .to_owned();
            if let Ok(mut log) = calls.lock() {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                log.push((now, who));
            }
            let status = if fail {
                "503 Service Unavailable"
            } else {
                "200 OK"
            };
            let reply =
                format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = stream.write_all(reply.as_bytes()).await;
        });
    }
}
