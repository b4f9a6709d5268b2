//! A Redis key layout for leaseq (one per-queue hash for the items, batch
//! commands per claim, lease groups; see `lua/v4/common.lua`), measured on
//! leaseq's `life_100` workload against the raw pipelined LPUSH/RPOP
//! baseline. Not wired into leaseq: the scripts here implement enqueue,
//! claim, ack, extend and reap only, enough for the workload and a semantic
//! smoke test. See README.md.
//!
//! `LAYOUT=v4|v2 layout-study check | pair [rounds iters] | stat [batches layout|raw] | split [batches]`
use redis::aio::MultiplexedConnection;
use redis::Value;
use std::time::{Duration, Instant};

const BATCH: usize = 100;
const PAYLOAD: &[u8] = b"0123456789abcdef";
const TTL_MS: u64 = 60_000;

/// The script layouts kept in `lua/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Full token stored per leased id, separate counter keys, no ack fast path.
    V2,
    /// Group stored per leased id, counter inside the items hash, ack fast path.
    V4,
}

struct Scripts {
    enqueue: String,
    claim: String,
    ack: String,
    extend: String,
    reap: String,
}

async fn load(conn: &mut MultiplexedConnection, common: &str, body: &str) -> String {
    let src = format!("{common}\n{body}");
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(src)
        .query_async(conn)
        .await
        .expect("SCRIPT LOAD")
}

struct Study {
    conn: MultiplexedConnection,
    s: Scripts,
    keys: Vec<String>,
    rng: u64,
    layout: Layout,
    check_ids: bool,
}

#[derive(Debug, Clone)]
#[allow(dead_code)]
struct Lease {
    id: u64,
    token: String,
    payload: Vec<u8>,
    att: u32,
    max: u32,
    pri: i32,
    enq: u64,
    exp: u64,
}

fn as_bytes(v: &Value) -> &[u8] {
    match v {
        Value::BulkString(b) => b,
        _ => panic!("expected a bulk string, got {v:?}"),
    }
}
fn parse<T: std::str::FromStr>(b: &[u8]) -> T {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("expected a number, got {:?}", String::from_utf8_lossy(b)))
}
fn as_int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::BulkString(b) => parse(b),
        _ => panic!("expected an integer, got {v:?}"),
    }
}
fn as_arr(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        _ => panic!("expected an array, got {v:?}"),
    }
}

impl Study {
    async fn new(conn: MultiplexedConnection, tag: &str, layout: Layout) -> Study {
        let mut c = conn.clone();
        let dir = format!(
            "{}/lua/{}/",
            env!("CARGO_MANIFEST_DIR"),
            match layout {
                Layout::V2 => "v2",
                Layout::V4 => "v4",
            }
        );
        let rd = |f: &str| {
            std::fs::read_to_string(format!("{dir}{f}"))
                .unwrap_or_else(|e| panic!("reading {dir}{f}: {e}"))
        };
        let common = rd("common.lua");
        let s = Scripts {
            enqueue: load(&mut c, &common, &rd("enqueue.lua")).await,
            claim: load(&mut c, &common, &rd("claim.lua")).await,
            ack: load(&mut c, &common, &rd("ack_many.lua")).await,
            extend: load(&mut c, &common, &rd("extend.lua")).await,
            reap: load(&mut c, &common, &rd("reap.lua")).await,
        };
        let check_ids = std::env::var("CHECK_IDS").map(|v| v != "0").unwrap_or(true);
        let first = if layout == Layout::V4 { "run" } else { "seq" };
        let names = [
            first, "idmark", "i", "r0", "rz", "sched", "leased", "tok", "att", "ext", "gi", "gn",
            "gseq", "notify", "dk", "dead", "listed",
        ];
        let keys = names.iter().map(|n| format!("{{{tag}}}:{n}")).collect();
        Study {
            conn,
            s,
            keys,
            rng: 0x9e3779b97f4a7c15,
            layout,
            check_ids,
        }
    }
    fn evalsha(&self, sha: &str) -> redis::Cmd {
        let mut c = redis::cmd("EVALSHA");
        c.arg(sha).arg(self.keys.len()).arg(&self.keys);
        c
    }
    fn next(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
    /// Items: (payload, priority, delay ms, dedup key).
    async fn enqueue(&mut self, items: &[(&[u8], i32, u64, &str)]) -> Vec<u64> {
        let fast = items.iter().all(|i| i.1 == 0 && i.2 == 0 && i.3.is_empty());
        let mut c = self.evalsha(&self.s.enqueue);
        c.arg(items.len()).arg(if fast { "f" } else { "g" });
        match self.layout {
            // The client's id floor (none here).
            Layout::V4 => c.arg(0),
            Layout::V2 => c.arg(if self.check_ids { "1" } else { "0" }),
        };
        for (p, pri, delay, dk) in items {
            let mut packed = format!("{},{},", 3, pri).into_bytes();
            packed.extend_from_slice(p);
            c.arg(packed);
            if !fast {
                c.arg(*pri).arg(*delay).arg(*dk);
            }
        }
        let v: Value = c.query_async(&mut self.conn).await.expect("enqueue");
        let a = as_arr(&v);
        if fast {
            let (first, n) = (as_int(&a[0]) as u64, as_int(&a[1]) as u64);
            (first..first + n).collect()
        } else {
            a.iter().map(|x| as_int(x) as u64).collect()
        }
    }
    async fn claim(&mut self, max: usize, ttl: u64) -> Vec<Lease> {
        let mut c = self.evalsha(&self.s.claim);
        // One random 96-bit group per claim; the token of slot k is group || k.
        let g = format!("{:016x}{:08x}", self.next(), self.next() as u32);
        let tokens: Vec<String> = (0..max).map(|k| format!("{g}{k:08x}")).collect();
        c.arg(ttl).arg(max).arg(g);
        if self.layout == Layout::V2 {
            c.arg(&tokens);
        }
        let v: Value = c.query_async(&mut self.conn).await.expect("claim");
        let a = as_arr(&v);
        let (ids, recs) = (as_arr(&a[0]), as_arr(&a[1]));
        // false (nil): every lease is its item's first attempt.
        let ones: Vec<Value> = if matches!(a[2], Value::Array(_)) {
            Vec::new()
        } else {
            vec![Value::BulkString(b"1".to_vec()); ids.len()]
        };
        let atts = if ones.is_empty() {
            as_arr(&a[2])
        } else {
            &ones[..]
        };
        let exp = as_int(&a[3]) as u64;
        let mut out = Vec::with_capacity(ids.len());
        for (k, ((id, rec), att)) in ids.iter().zip(recs).zip(atts).enumerate() {
            let rec = as_bytes(rec);
            let mut parts = rec.splitn(4, |b| *b == b',');
            let mut field = || {
                parts
                    .next()
                    .unwrap_or_else(|| panic!("record {:?}", String::from_utf8_lossy(rec)))
            };
            let enq = parse(field());
            let max = parse(field());
            let pri = parse(field());
            let payload = field().to_vec();
            out.push(Lease {
                id: parse(as_bytes(id)),
                token: tokens[k].clone(),
                payload,
                att: parse(as_bytes(att)),
                max,
                pri,
                enq,
                exp,
            });
        }
        out
    }
    async fn ack_many(&mut self, leases: &[(u64, String)]) -> Vec<i64> {
        let mut c = self.evalsha(&self.s.ack);
        c.arg(leases.len());
        for l in leases {
            c.arg(l.0);
        }
        if self.layout == Layout::V2 {
            for l in leases {
                c.arg(&l.1);
            }
        }
        // Runs of consecutive leases sharing a group (the token's first 24 hex digits).
        let mut i = 0;
        while i < leases.len() {
            let g = &leases[i].1[..24];
            let mut j = i + 1;
            while j < leases.len() && &leases[j].1[..24] == g {
                j += 1;
            }
            c.arg(g).arg(j - i);
            i = j;
        }
        let v: Value = c.query_async(&mut self.conn).await.expect("ack_many");
        as_arr(&v).iter().map(as_int).collect()
    }
    async fn extend(&mut self, id: u64, tok: &str, ttl: u64) -> i64 {
        let mut c = self.evalsha(&self.s.extend);
        let fence = match self.layout {
            Layout::V4 => &tok[..24],
            Layout::V2 => tok,
        };
        c.arg(id).arg(fence).arg(ttl);
        let v: Value = c.query_async(&mut self.conn).await.expect("extend");
        as_int(&v)
    }
    async fn reap(&mut self) -> (i64, i64) {
        let mut c = self.evalsha(&self.s.reap);
        c.arg(100);
        let v: Value = c.query_async(&mut self.conn).await.expect("reap");
        let a = as_arr(&v);
        (as_int(&a[0]), as_int(&a[1]))
    }
    /// `life_100`: enqueue 100, claim 100, ack 100, one script each.
    async fn life(&mut self, iters: u64) -> Duration {
        let items: Vec<(&[u8], i32, u64, &str)> = (0..BATCH).map(|_| (PAYLOAD, 0, 0, "")).collect();
        let start = Instant::now();
        for _ in 0..iters {
            self.enqueue(&items).await;
            let leases = self.claim(BATCH, TTL_MS).await;
            assert_eq!(leases.len(), BATCH);
            let keys: Vec<(u64, String)> = leases.into_iter().map(|l| (l.id, l.token)).collect();
            let lost = self.ack_many(&keys).await;
            assert!(lost.is_empty());
        }
        start.elapsed()
    }
}

/// The raw baseline: 100 pipelined LPUSH, then 100 pipelined RPOP.
struct Raw {
    conn: MultiplexedConnection,
    key: String,
}
impl Raw {
    async fn life(&mut self, iters: u64) -> Duration {
        let payloads: Vec<&[u8]> = (0..BATCH).map(|_| PAYLOAD).collect();
        let start = Instant::now();
        for _ in 0..iters {
            let mut pipe = redis::pipe();
            for p in &payloads {
                pipe.lpush(&self.key, *p).ignore();
            }
            pipe.query_async::<()>(&mut self.conn)
                .await
                .expect("raw LPUSH");
            let mut pipe = redis::pipe();
            for _ in 0..BATCH {
                pipe.rpop(&self.key, None);
            }
            let got: Vec<Option<Vec<u8>>> =
                pipe.query_async(&mut self.conn).await.expect("raw RPOP");
            assert_eq!(got.iter().filter(|v| v.is_some()).count(), BATCH);
        }
        start.elapsed()
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

async fn info(conn: &mut MultiplexedConnection, section: &str) -> String {
    redis::cmd("INFO")
        .arg(section)
        .query_async(conn)
        .await
        .expect("INFO")
}
/// The server's CPU seconds (user + system) from INFO cpu.
fn cpu(s: &str) -> f64 {
    let get = |k: &str| -> f64 {
        let v = s
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .unwrap_or_else(|| panic!("INFO cpu has no {k}"));
        parse(v.trim().as_bytes())
    };
    get("used_cpu_sys:") + get("used_cpu_user:")
}
/// One `cmdstat_<name>:calls=..,usec=..` line: (name, calls, usec).
fn cmdstat(l: &str) -> Option<(&str, f64, f64)> {
    let (name, rest) = l.split_once(':')?;
    let name = name.strip_prefix("cmdstat_")?;
    let f = |k: &str| -> Option<f64> {
        rest.split(',')
            .find_map(|kv| kv.strip_prefix(k))?
            .parse()
            .ok()
    };
    Some((name, f("calls=")?, f("usec=")?))
}
async fn reset_stats(admin: &mut MultiplexedConnection) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(admin)
        .await
        .expect("CONFIG RESETSTAT");
}

fn text(l: &[Lease]) -> Vec<String> {
    l.iter()
        .map(|l| String::from_utf8_lossy(&l.payload).into_owned())
        .collect()
}

/// Semantic smoke test: order across list and zset, delay, fencing, extend, reap, attempts.
async fn check(p: &mut Study) {
    // Priorities, delay and FIFO across list and zset.
    let ids = p
        .enqueue(&[
            (b"a", 0, 0, ""),
            (b"b", 5, 0, ""),
            (b"c", 0, 0, ""),
            (b"d", -1, 0, ""),
            (b"e", 0, 300, ""),
        ])
        .await;
    let ids2 = p.enqueue(&[(b"f", 0, 0, "")]).await;
    let order = text(&p.claim(3, 1000).await);
    assert_eq!(order, ["b", "a", "c"], "ids {ids:?} {ids2:?}");
    tokio::time::sleep(Duration::from_millis(350)).await;
    // e (due now, priority 0) comes before f (a later id) although e sits in the zset.
    let l = p.claim(10, 200).await;
    assert_eq!(text(&l), ["e", "f", "d"]);
    // Fencing: a stale token is lost and changes nothing; a repeated ack is lost.
    let lost = p
        .ack_many(&[
            (l[0].id, "00".repeat(16)),
            (l[1].id, l[1].token.clone()),
            (l[1].id, l[1].token.clone()),
        ])
        .await;
    assert_eq!(lost, [1, 3]);
    // Extend one lease of the group; the rest expire and are reaped.
    assert!(p.extend(l[0].id, &l[0].token, 5000).await > 0);
    assert_eq!(p.extend(l[1].id, &l[1].token, 5000).await, 0);
    tokio::time::sleep(Duration::from_millis(250)).await;
    let (back, dead) = p.reap().await;
    assert_eq!((back, dead), (1, 0), "d back, e extended, f acked");
    let again = p.claim(10, 1000).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].payload, b"d");
    assert_eq!(again[0].att, 2, "attempts counted");
    let lost = p
        .ack_many(&[
            (l[0].id, l[0].token.clone()),
            (again[0].id, again[0].token.clone()),
        ])
        .await;
    assert!(lost.is_empty());
    println!("check: ok");
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("pair");
    let num = |i: usize, d: u64| {
        args.get(i)
            .map(|s| s.parse().expect("a count"))
            .unwrap_or(d)
    };
    let url = std::env::var("REDIS_URL").unwrap_or("redis://127.0.0.1:6399".into());
    let info_c = redis::IntoConnectionInfo::into_connection_info(url.as_str())
        .expect("REDIS_URL")
        .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
    let client = redis::Client::open(info_c).expect("redis client");
    let conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let mut admin = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let tag = format!("study:{}", std::process::id());
    let layout = match std::env::var("LAYOUT").as_deref() {
        Ok("v2") => Layout::V2,
        Ok("v4") | Err(_) => Layout::V4,
        Ok(other) => panic!("LAYOUT: v4 or v2, not {other:?}"),
    };
    let mut p = Study::new(conn.clone(), &tag, layout).await;
    let mut raw = Raw {
        conn: conn.clone(),
        key: format!("study:raw:{}", std::process::id()),
    };
    match mode {
        "check" => check(&mut p).await,
        "pair" => {
            let (rounds, iters) = (num(2, 60), num(3, 10));
            p.life(iters).await;
            raw.life(iters).await;
            let (mut a, mut b, mut ca, mut cb) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            let jobs = (iters as usize * BATCH) as f64;
            for r in 0..rounds {
                // Alternate which side goes first.
                for side in [r % 2, 1 - r % 2] {
                    let c0 = cpu(&info(&mut admin, "cpu").await);
                    let t = if side == 0 {
                        p.life(iters).await
                    } else {
                        raw.life(iters).await
                    };
                    let c1 = cpu(&info(&mut admin, "cpu").await);
                    let us = t.as_secs_f64() * 1e6 / iters as f64;
                    let cpu_job = (c1 - c0) * 1e6 / jobs;
                    if side == 0 {
                        a.push(us);
                        ca.push(cpu_job);
                    } else {
                        b.push(us);
                        cb.push(cpu_job);
                    }
                }
            }
            let (ma, mb) = (median(a), median(b));
            let per_s = BATCH as f64 * 1e6;
            println!(
                "{layout:?} {ma:8.1} us/batch {:9.0} jobs/s | raw {mb:8.1} us/batch {:9.0} jobs/s | ratio {:.0}% | server CPU/job {layout:?} {:.2} raw {:.2}",
                per_s / ma,
                per_s / mb,
                100.0 * mb / ma,
                median(ca),
                median(cb)
            );
        }
        "stat" => {
            let batches = num(2, 3000);
            let which = args.get(3).map(String::as_str).unwrap_or("layout");
            let on_raw = which == "raw";
            if on_raw {
                raw.life(10).await;
            } else {
                p.life(10).await;
            }
            reset_stats(&mut admin).await;
            let c0 = cpu(&info(&mut admin, "cpu").await);
            let t = if on_raw {
                raw.life(batches).await
            } else {
                p.life(batches).await
            };
            let c1 = cpu(&info(&mut admin, "cpu").await);
            let jobs = (batches as usize * BATCH) as f64;
            let cs = info(&mut admin, "commandstats").await;
            let side = if on_raw {
                "raw".into()
            } else {
                format!("{layout:?}")
            };
            println!(
                "{side}: {batches} batches, {:.0} jobs/s alone, server CPU {:.2} us/job",
                jobs / t.as_secs_f64(),
                (c1 - c0) * 1e6 / jobs
            );
            let mut rows: Vec<_> = cs.lines().filter_map(cmdstat).collect();
            rows.sort_by(|a, b| b.2.total_cmp(&a.2));
            for (name, calls, usec) in rows {
                if name == "info" || name.starts_with("config") {
                    continue;
                }
                println!(
                    "  {name:<14} {:7.3} us/job  {:7.3} calls/job  {:6.3} us/call",
                    usec / jobs,
                    calls / jobs,
                    usec / calls
                );
            }
        }
        "split" => {
            let batches = num(2, 1000);
            let items: Vec<(&[u8], i32, u64, &str)> =
                (0..BATCH).map(|_| (PAYLOAD, 0, 0, "")).collect();
            p.life(10).await;
            let jobs = (batches as usize * BATCH) as f64;
            let mut leases = Vec::new();
            for phase in ["enqueue", "claim", "ack_many"] {
                reset_stats(&mut admin).await;
                for _ in 0..batches {
                    match phase {
                        "enqueue" => {
                            p.enqueue(&items).await;
                        }
                        "claim" => {
                            let l = p.claim(BATCH, TTL_MS).await;
                            leases.push(l.into_iter().map(|l| (l.id, l.token)).collect::<Vec<_>>());
                        }
                        _ => {
                            let k = leases.pop().expect("a claimed batch");
                            assert!(p.ack_many(&k).await.is_empty());
                        }
                    }
                }
                let cs = info(&mut admin, "commandstats").await;
                let (mut ev, mut inner) = (0.0, 0.0);
                for (name, _, usec) in cs.lines().filter_map(cmdstat) {
                    if name == "evalsha" {
                        ev = usec
                    } else if name != "info" && !name.starts_with("config") {
                        inner += usec
                    }
                }
                println!(
                    "{phase:<9} evalsha {:6.3} us/job, commands {:6.3}, Lua and the rest {:6.3}",
                    ev / jobs,
                    inner / jobs,
                    (ev - inner) / jobs
                );
            }
        }
        _ => panic!(
            "mode: check | pair [rounds iters] | stat [batches layout|raw] | split [batches]"
        ),
    }
    let _: () = redis::cmd("DEL")
        .arg(&p.keys)
        .arg(&raw.key)
        .query_async(&mut admin)
        .await
        .expect("DEL");
}
