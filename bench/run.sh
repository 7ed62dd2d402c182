#!/usr/bin/env bash
# Runs the benchmarks and prints their tables: bench/run.sh api|sse|sse-fanout|egress|start|idle-memory|vnc|ssh|guard|hot-sync|ccp|reliability|cluster|all   (see bench/README.md)
source "$(dirname "$0")/../scripts/lib.sh"
cd "$(dirname "$0")/.."

which="${1:-all}"
case "$which" in
  api) benches=(api) ;;
  sse) benches=(sse) ;;
  sse-fanout) benches=(sse-fanout) ;;
  egress) benches=(egress) ;;
  start) benches=(start) ;;
  idle-memory) benches=(idle-memory) ;;
  vnc) benches=(vnc) ;;
  ssh) benches=(ssh) ;;
  guard) benches=(guard) ;;
  hot-sync) benches=(hot-sync) ;;
  ccp) benches=(ccp) ;;
  reliability) benches=(reliability) ;;
  cluster) benches=(cluster) ;;
  all) benches=(api sse sse-fanout egress start vnc ssh hot-sync) ;;
  *) die "usage: bench/run.sh api|sse|sse-fanout|egress|start|idle-memory|vnc|ssh|guard|hot-sync|ccp|reliability|cluster|all" ;;
esac

# The egress, start, vnc and ssh benches need root (the network lab, nsenter, Docker); `all` skips them without it.
if [ "$(id -u)" -ne 0 ]; then
  case "$which" in
    egress | start | idle-memory | vnc | ssh | guard | ccp | reliability | cluster) die "the $which bench needs root" ;;
    all)
      warn "not root: skipping the egress, start, vnc and ssh benches"
      benches=(api sse sse-fanout hot-sync)
      ;;
  esac
fi

# Build when dist is missing or older than a source file, so the numbers are those of the current code.
stamp=apps/gateway/tsconfig.tsbuildinfo
if [ ! -f apps/gateway/dist/main.js ] || [ ! -f "$stamp" ] ||
  [ -n "$(find apps/gateway/src packages/api/src -newer "$stamp" -print -quit)" ]; then
  build
fi

if [[ (" ${benches[*]} " == *' sse-fanout '* || " ${benches[*]} " == *' cluster '* ||
  (" ${benches[*]} " == *' api '* && "${BENCH_DATABASES:-sqlite,postgres}" == *postgres*)) &&
  -z "${BENCH_POSTGRES_URL:-}" ]]; then
  say "PostgreSQL (role ccp_bench)"
  PG_ROLE_PASSWORD=ccp_bench bash scripts/postgres.sh ensure ccp_bench
fi

if [[ " ${benches[*]} " == *' start '* || " ${benches[*]} " == *' idle-memory '* || " ${benches[*]} " == *' vnc '* ||
  " ${benches[*]} " == *' ssh '* || " ${benches[*]} " == *' guard '* || " ${benches[*]} " == *' ccp '* ||
  " ${benches[*]} " == *' reliability '* ||
  " ${benches[*]} " == *' cluster '* ]]; then
  say "Docker"
  bash scripts/docker.sh ensure
fi

# The SSE bench holds 2,000 sockets in each of two processes; the SSH bench's gateway two per session.
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 8192 ]; then
  hard=$(ulimit -Hn)
  if [ "$hard" = unlimited ] || [ "$hard" -ge 8192 ]; then ulimit -n 8192; else ulimit -n "$hard"; fi
  [ "$(ulimit -n)" -ge 4096 ] || warn "open-file limit is $(ulimit -n); the SSE and SSH benches may fail to open their sockets"
fi

child=''
stop_child() {
  # The bench stops its own children (by PID) and drops its database when it gets SIGTERM.
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
    child=''
  fi
}
trap 'stop_child; exit 130' INT
trap 'stop_child; exit 143' TERM
trap stop_child EXIT

status=0
for bench in "${benches[@]}"; do
  say "bench: $bench"
  node --conditions=source --import tsx "bench/$bench/bench.ts" &
  child=$!
  rc=0
  wait "$child" || rc=$?
  child=''
  [ "$rc" -eq 0 ] || { warn "bench $bench failed (exit $rc)"; status=$rc; }
done
exit "$status"
