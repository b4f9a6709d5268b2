#!/usr/bin/env python3
"""Regenerates the "Targets, one command" table of benches/RESULTS.md.

Run from the workspace root, with Redis and PostgreSQL up:

    cargo build --release -p leaseq-benches --bins
    python3 benches/targets.py            # runs everything, rewrites the table
    python3 benches/targets.py --dry-run  # prints the table only

It runs, in turn:
- the drain matrix: 20,000 jobs (memory: 300,000) drained by 8 consumers,
  the API loop against the Worker, on every backend, 3 rounds; the medians
  and the Worker's share of the API;
- the latency row: enqueue-to-start at 100 jobs/s with the default Worker
  (`--runtime worker -p 1 -c 1 --batch 1 --rate 100`) on Redis and
  PostgreSQL, 3 rounds each, taking turns; the medians of p50 and p99;
- `leaseq-pair` on `life_100` against each backend's bare baseline
  (SQLite at FULL and at NORMAL).

PostgreSQL tables are vacuumed before each PostgreSQL run: the server may
run without autovacuum, and dead rows from the run before would slow the
next. The load average is read before and after each part, and printed
with the table, with the commit and the time.
"""

import argparse
import datetime
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys

BEGIN = "<!-- targets:begin (benches/targets.py writes between these lines) -->"
END = "<!-- targets:end -->"
RESULTS = pathlib.Path("benches/RESULTS.md")
BIN = pathlib.Path(os.environ.get("LEASEQ_BENCH_BIN", "target/release"))
PG = os.environ.get("LEASEQ_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("LEASEQ_REDIS_URL", "redis://127.0.0.1:6379")
SQLITE_FILE = "/tmp/leaseq-targets.db"


def redact(text):
    """`text` with the password of every URL in it replaced by `***`."""
    return re.sub(r"(://[^/:@\s]*:)[^@\s]*@", r"\1***@", text)


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def vacuum():
    """Vacuums the tables the runs churn: the backend's and the baseline's.
    One `-c` per table, since VACUUM cannot run in the transaction that
    several statements of one `-c` share; a table not made yet (a first
    run) is skipped."""
    tables = subprocess.run(
        ["psql", PG, "-qAtc",
         "SELECT format('%I.%I', schemaname, relname) FROM pg_stat_user_tables "
         "WHERE schemaname IN ('leaseq_bench', 'leaseq_bench_raw')"],
        capture_output=True, text=True, check=False,
    ).stdout.split()
    args = ["psql", PG, "-q"]
    for table in tables:
        args += ["-c", f"VACUUM {table}"]
    if tables:
        out = subprocess.run(args, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            sys.exit(f"targets: vacuuming {redact(PG)} failed:\n{redact(out.stderr)}")


def run_json(args, env=None):
    out = subprocess.run(
        args,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if out.returncode != 0:
        command = redact(" ".join(args))
        sys.exit(f"targets: {command} failed ({out.returncode}):\n{redact(out.stderr)}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def backend_args(target):
    if target == "memory":
        return ["--url", "memory://"]
    if target in ("redis-rs", "fred"):
        return ["--url", REDIS, "--client", target]
    if target == "postgres":
        vacuum()
        return ["--url", PG]
    for f in pathlib.Path("/tmp").glob("leaseq-targets.db*"):
        f.unlink()
    return ["--url", f"sqlite://{SQLITE_FILE}"]


class Part:
    """One part of the run: its rows and the load average around it."""

    def __init__(self, name):
        self.name = name
        self.loads = [load_average()]
        print(f"targets: {name}", file=sys.stderr)

    def done(self):
        self.loads.append(load_average())

    def load(self):
        return f"{min(self.loads):.1f}–{max(self.loads):.1f}"


def drain_matrix(rounds):
    part = Part("drain matrix")
    runs = {}
    for _ in range(rounds):
        for target in ["memory", "redis-rs", "fred", "postgres", "sqlite"]:
            for runtime in ["api", "worker"]:
                jobs = "300000" if target == "memory" else "20000"
                r = run_json(
                    [str(BIN / "leaseq-load"), *backend_args(target), "--drain", jobs, "-c", "8",
                     "--runtime", runtime, "--queue", "targets-drain", "--json"]
                )
                runs.setdefault((target, runtime), []).append(r["drain_per_sec"])
                part.loads.append(load_average())
    part.done()
    rows = []
    for target in ["memory", "redis-rs", "fred", "postgres", "sqlite"]:
        api = statistics.median(runs[(target, "api")])
        worker = statistics.median(runs[(target, "worker")])
        rows.append(
            f"| drain, Worker / API | {target} | {worker:,.0f} / {api:,.0f} jobs/s | "
            f"{worker / api:.0%} | ≥ 70% | {verdict(worker / api >= 0.70)} | {part.load()} |"
        )
    return rows


def latency(rounds, seconds):
    part = Part("latency")
    runs = {}
    for _ in range(rounds):
        for target in ["redis-rs", "postgres"]:
            r = run_json(
                [str(BIN / "leaseq-load"), *backend_args(target), "--runtime", "worker", "-p", "1",
                 "-c", "1", "--batch", "1", "--rate", "100", "-d", str(seconds),
                 "--queue", "targets-latency", "--json"]
            )
            start = r["start_latency"]
            runs.setdefault(target, []).append((start["p50_us"], start["p99_us"]))
            part.loads.append(load_average())
    part.done()
    p50 = {t: statistics.median(v[0] for v in runs[t]) for t in runs}
    p99 = {t: statistics.median(v[1] for v in runs[t]) for t in runs}
    ratio = p50["postgres"] / p50["redis-rs"]
    quiet = max(part.loads) < 1.5
    rows = [
        f"| enqueue-to-start at 100 jobs/s, p50 / p99 | redis-rs | "
        f"{p50['redis-rs'] / 1000:.2f} / {p99['redis-rs'] / 1000:.2f} ms | | | | {part.load()} |",
        f"| enqueue-to-start at 100 jobs/s, p50 / p99 | postgres | "
        f"{p50['postgres'] / 1000:.2f} / {p99['postgres'] / 1000:.2f} ms | {ratio:.1f}x Redis | "
        + (
            "p50 ≤ 2 ms, p99 ≤ 10 ms (quiet box) | "
            + verdict(p50["postgres"] <= 2000 and p99["postgres"] <= 10_000)
            if quiet
            else "p50 ≤ 3x Redis (busy box) | " + verdict(ratio <= 3.0)
        )
        + f" | {part.load()} |",
    ]
    return rows


def pairs(rounds):
    part = Part("life_100 against the bare baselines")
    rows = []
    cases = [
        ("redis-rs", None, {}, 0.50),
        ("fred", None, {}, 0.50),
        ("postgres", "postgres-raw-batchdel", {}, 0.70),
        ("sqlite", None, {}, 0.70),
        ("sqlite", None, {"LEASEQ_BENCH_SQLITE_SYNC": "normal"}, 0.70),
    ]
    for backend, baseline, env, bar in cases:
        if backend == "postgres":
            vacuum()
        before = load_average()
        r = run_json(
            [str(BIN / "leaseq-pair"), "--backend", backend, "--workload", "life_100",
             "--rounds", str(rounds), "--iters", "10", "--json"]
            + (["--baseline", baseline] if baseline else []),
            env,
        )
        after = load_average()
        part.loads += [before, after]
        label = backend + (" (NORMAL)" if env else " (FULL)" if backend == "sqlite" else "")
        rows.append(
            f"| `life_100` / {r['baseline']} | {label} | "
            f"{r['leaseq_us_per_iter']:,.0f} / {r['baseline_us_per_iter']:,.0f} µs | "
            f"{r['ratio_medians']:.0%} (totals {r['ratio_totals']:.0%}) | ≥ {bar:.0%} | "
            f"{verdict(r['ratio_medians'] >= bar)} | {min(before, after):.1f}–{max(before, after):.1f} |"
        )
    part.done()
    return rows


def verdict(ok):
    return "met" if ok else "missed"


def table(rows):
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = [
        f"Written by `python3 benches/targets.py` at {now}, commit `{commit}`, "
        f"{os.cpu_count()} CPUs; release build; load average (1 min) read around each part.",
        "",
        "| measure | backend | figure | ratio | target | verdict | load average |",
        "|---|---|---|---|---|---|---|",
    ]
    return "\n".join(head + rows)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3, help="rounds of the drain matrix and latency")
    p.add_argument("--latency-seconds", type=int, default=10)
    p.add_argument("--pair-rounds", type=int, default=30)
    p.add_argument("--dry-run", action="store_true", help="print the table, leave RESULTS.md")
    a = p.parse_args()
    for b in ["leaseq-load", "leaseq-pair"]:
        if not (BIN / b).exists():
            sys.exit(f"targets: no {BIN / b}: build it with `cargo build --release -p leaseq-benches --bins`")
    rows = drain_matrix(a.rounds) + latency(a.rounds, a.latency_seconds) + pairs(a.pair_rounds)
    text = table(rows)
    print(text)
    if a.dry_run:
        return
    results = RESULTS.read_text()
    if BEGIN not in results or END not in results:
        sys.exit(f"targets: {RESULTS} has no {BEGIN!r} … {END!r} section")
    start = results.index(BEGIN) + len(BEGIN)
    end = results.index(END)
    RESULTS.write_text(results[:start] + "\n" + text + "\n" + results[end:])
    print(f"targets: wrote {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
