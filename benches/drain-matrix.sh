#!/usr/bin/env bash
# Run from the workspace root after `cargo build --release -p leaseq-benches --bin leaseq-load`.
# Drain 20,000 jobs (memory: 300,000) with 8 consumers, API vs Worker, 3 rounds; prints medians.
# SQLite: a fresh file in /tmp each run, at LEASEQ_BENCH_SQLITE_SYNC (default: the backend's FULL).
L=${L:-target/release/leaseq-load}
P=${LEASEQ_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
R=${LEASEQ_REDIS_URL:-redis://127.0.0.1:6379}
declare -A runs
for round in 1 2 3; do
  for target in memory redis-rs fred postgres sqlite; do
    for rt in api worker; do
      case $target in
        memory) args="--url memory:// --drain 300000";;
        redis-rs) args="--url $R --client redis-rs --drain 20000";;
        fred) args="--url $R --client fred --drain 20000";;
        postgres) psql "$P" -qc "vacuum leaseq_bench.leaseq_items" 2>/dev/null; args="--url $P --drain 20000";;
        sqlite) rm -f /tmp/leaseq-drain-matrix.db*; args="--url sqlite:///tmp/leaseq-drain-matrix.db --drain 20000";;
      esac
      v=$($L $args -c 8 --runtime $rt --queue drain-matrix --json | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["drain_per_sec"]))')
      runs[$target-$rt]="${runs[$target-$rt]} $v"
    done
  done
done
for target in memory redis-rs fred postgres sqlite; do
  a=$(echo ${runs[$target-api]} | tr ' ' '\n' | sort -n | sed -n 2p)
  w=$(echo ${runs[$target-worker]} | tr ' ' '\n' | sort -n | sed -n 2p)
  echo "$target api [${runs[$target-api]} ] median $a | worker [${runs[$target-worker]} ] median $w | ratio $(python3 -c "print(f'{$w/$a:.0%}')")"
done
