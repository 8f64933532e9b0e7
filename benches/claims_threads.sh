#!/usr/bin/env bash
# Benchmark: claims per second with long-lived claimers (C threads, each with its own
# connection, each looping alloc::next::claim_next until nothing is left), PostgreSQL
# against SQLite side by side in one run, for C = 1 16 64 by default; prints claims/s,
# the ratio pg/sqlite and the goal (PostgreSQL >= 1,000/s at 64 claimers). The code is
# benches/claims_threads.rs, built by `cargo bench` (the release profile); PostgreSQL is
# a throwaway cluster with fsync on (benches/pg_cluster.sh).
# usage: benches/claims_threads.sh [POOL] [C...]   (POOL: ready tasks per run, default 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
pool="${1:-1000}"; shift || true
claimers="${*:-1 16 64}"
. benches/pg_cluster.sh
SPICE_BENCH_POSTGRES="$(pg_url '{db}')" \
  cargo bench --locked --bench claims_threads -- --pool "$pool" --claimers "${claimers// /,}"
