//! What the demo prints.

use std::time::Duration;

use super::fleet::Ctx;
use super::tally::Verdict;
use super::{DemoArgs, End};

pub(crate) fn header(url: &str, args: &DemoArgs, ttl: Duration) {
    println!(
        "leaseq demo on {url}: {} items, {} producers, {} workers x {} handlers, \
         crash rate {:.1}%, {} extra reapers, lease {} ms",
        args.items,
        args.producers,
        args.workers,
        args.concurrency,
        args.crash_rate * 100.0,
        args.reapers,
        ttl.as_millis()
    );
    if args.crash_rate > 0.0 {
        println!(
            "workers are killed mid-job on purpose (simulated crashes); the errors they \
             log are expected and hidden (RUST_LOG=error shows them)"
        );
    }
}

pub(crate) fn print(ctx: &Ctx, v: &Verdict, elapsed: Duration, end: End) {
    let finished = end == End::Drained;
    let t = &ctx.tally;
    let m = ctx.metrics.snapshot();
    let secs = elapsed.as_secs_f64().max(1e-9);
    println!();
    println!(
        "{:<14} {:.2} s{}",
        "elapsed",
        elapsed.as_secs_f64(),
        if finished {
            ""
        } else {
            " (stopped before the end)"
        }
    );
    println!(
        "{:<14} {:.0} items/s acked",
        "throughput",
        v.acked as f64 / secs
    );
    let pct = |p: f64| v.percentile(p).map_or("-".to_string(), fmt_dur);
    println!(
        "{:<14} p50 {}  p90 {}  p99 {}  max {}  (enqueue to ack)",
        "latency",
        pct(50.0),
        pct(90.0),
        pct(99.0),
        pct(100.0)
    );
    println!(
        "{:<14} {} workers killed mid-job, dropping every lease they held \
         ({} in running handlers); reapers recovered {} expired leases",
        "crashes",
        t.count(&t.crashes),
        t.count(&t.dropped_leases),
        t.count(&t.reaped) + m.reaped,
    );
    print!(
        "{:<14} {} refused as stale (lease lost), {} accepted (lease not yet recovered)",
        "late acks",
        t.count(&t.late_rejected),
        t.count(&t.late_accepted)
    );
    match t.late_unanswered() {
        0 => println!(),
        n => println!(", {n} unanswered (reply lost)"),
    }
    println!(
        "{:<14} claimed {}, acked {}, retried {}, lease lost {}, repaired {}",
        "workers",
        m.claimed,
        m.acked,
        m.retried,
        m.lease_lost,
        m.repaired + t.count(&t.repaired)
    );
    println!();
    println!("verdict");
    println!("  {:<14} {}", "enqueued", v.enqueued);
    if v.unconfirmed > 0 {
        println!(
            "  {:<14} {}  ({} of them by acks whose reply never came back: a crash or a lost reply)",
            "acked", v.acked, v.unconfirmed
        );
    } else {
        println!("  {:<14} {}", "acked", v.acked);
    }
    println!("  {:<14} {}", "acked twice", v.acked_twice);
    println!("  {:<14} {}", "lost", v.lost);
    println!("  {:<14} {}", "dead", v.dead);
    if v.unexpected > 0 || v.acked_and_dead > 0 || v.left_in_queue > 0 {
        println!("  {:<14} {}", "never enqueued", v.unexpected);
        println!("  {:<14} {}", "acked and dead", v.acked_and_dead);
        println!("  {:<14} {}", "left in queue", v.left_in_queue);
    }
    let expected = v.enqueued.max(1);
    if v.passed(expected) && finished {
        println!("PASS: every item was acked or dead exactly once; nothing lost, nothing twice");
    } else if end == End::Interrupted && v.lost == 0 && v.acked_twice == 0 && v.acked_and_dead == 0
    {
        println!(
            "INTERRUPTED: so far nothing lost, nothing twice ({} items were still in the queue)",
            v.left_in_queue
        );
    } else {
        println!("FAIL");
    }
}

fn fmt_dur(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.2} s", d.as_secs_f64())
    } else {
        format!("{:.1} ms", d.as_secs_f64() * 1000.0)
    }
}
