#!/usr/bin/env bash
# Starts what the tests need on this machine: Redis on 127.0.0.1:6379 and
# PostgreSQL on 127.0.0.1:5432 with the database `test` that user
# `postgres` reaches without a password from loopback (the tests' default
# URLs). Installs the Debian packages when they are missing and it runs as
# root (or with sudo). Says how to get Chromium for the dashboard's browser
# test. Safe to run again: what already runs is left alone.
#
#   scripts/dev-services.sh            # then: cargo test --workspace --all-features
set -euo pipefail

as_root=""
[ "$(id -u)" -eq 0 ] || as_root="sudo"

need() { command -v "$1" >/dev/null 2>&1; }

install() {
  if ! need apt-get; then
    echo "install $* with your package manager, then run this again" >&2
    exit 1
  fi
  $as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq "$@" >/dev/null
}

# Redis: a server of our own, no persistence (the tests start private
# servers too, so redis-server must be on PATH).
need redis-server && need redis-cli || install redis-server
if redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "redis: already answering on 127.0.0.1:6379"
else
  dir="${TMPDIR:-/tmp}/leaseq-dev-redis"
  mkdir -p "$dir"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" \
    --appendonly no --dir "$dir" --logfile "$dir/redis.log"
  echo "redis: started on 127.0.0.1:6379 (log: $dir/redis.log)"
fi

# PostgreSQL: the distribution's cluster.
need pg_ctlcluster || install postgresql
if pg_isready -h 127.0.0.1 -p 5432 -q; then
  echo "postgres: already answering on 127.0.0.1:5432"
else
  version="$(ls /etc/postgresql | sort -n | tail -1)"
  $as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
  echo "postgres: started cluster $version/main on 127.0.0.1:5432"
fi
if ! psql -h 127.0.0.1 -U postgres -d postgres -Atc 'select 1' >/dev/null 2>&1; then
  hba="$(ls /etc/postgresql/*/main/pg_hba.conf 2>/dev/null | tail -1)"
  cat >&2 <<MSG
postgres: user postgres cannot log in from 127.0.0.1 without a password.
The tests connect as postgres://postgres@127.0.0.1:5432/test. Either put
  host all postgres 127.0.0.1/32 trust
first in ${hba:-pg_hba.conf} and reload (pg_ctlcluster VERSION main reload),
or export LEASEQ_DATABASE_URL=postgres://USER:PASSWORD@127.0.0.1:5432/test
for a role that may create schemas, and run this again.
MSG
  exit 1
fi
if [ "$(psql -h 127.0.0.1 -U postgres -d postgres -Atc "select 1 from pg_database where datname = 'test'")" != 1 ]; then
  psql -h 127.0.0.1 -U postgres -d postgres -qc 'create database test'
  echo "postgres: created database test"
else
  echo "postgres: database test exists"
fi

# Chromium: only the dashboard's browser test (dashboard/tests/browser.rs)
# needs it; without it that test says it skipped (and fails under CI=true).
if need chromium && need chromedriver; then
  echo "chromium: $(chromium --version 2>/dev/null | head -1)"
else
  echo "chromium: not found; for the dashboard's browser test install Debian's"
  echo "  chromium and chromium-driver: sudo apt-get install chromium chromium-driver"
fi

echo "ready: cargo test --workspace --all-features"
