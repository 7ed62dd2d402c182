#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh Debian 12 machine (as root) and runs it:
# Debian packages, npm dependencies, build, lint, type checks, Docker, PostgreSQL, then every test.
# Closes with "N passed, N failed, N skipped" and every skipped suite or test with its reason.
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

mapfile -t packages < <(grep -v '^\s*#' scripts/test-packages.txt | sed '/^\s*$/d')
apt_install "${packages[@]}" openssh-client
npm_install
build

say "lint and format check (biome)"
npx biome check .
say "type check of every package, the tests, the lab and the benchmarks"
npm run --silent typecheck
say "npm audit of what users run (--omit=dev); apps/cli/test/npm-audit.test.ts judges the report"
mkdir -p test-output
npm audit --omit=dev --json >test-output/npm-audit.json 2>/dev/null || true

bash scripts/docker.sh ensure
bash scripts/folder-mounts.sh ensure
say "workspace and egress gateway images (test variant; built once per recipe change)"
bash image/build.sh --variant test all
PG_ROLE_PASSWORD=ccp_test bash scripts/postgres.sh ensure ccp_test
bash scripts/postgres.sh enable-tls /var/lib/postgresql/ccp-test-tls
export TEST_POSTGRES_CA=/var/lib/postgresql/ccp-test-tls/ca.crt
# Databases left by an interrupted earlier run (each test drops its own on success).
for db in $(runuser -u postgres -- psql -qAtc "select datname from pg_database where datname like 'ccp\_t\_%'"); do
  runuser -u postgres -- psql -qc "drop database if exists \"$db\" with (force)" >/dev/null
done
export TEST_POSTGRES_URL="postgres://ccp_test:ccp_test@127.0.0.1:5432/postgres"
export TEST_DATABASES="${TEST_DATABASES:-sqlite,postgres}"

# Leave no lab, container, volume or uplink guard behind, even when a test run is interrupted; and remove what
# a run stopped before its own clean-up (a machine shut down) left, as a test checking for leftovers would see it.
cleanup() {
  bash test/lab/lab.sh down >/dev/null 2>&1 || true
  for label in cloud-cli-proxy.host cloud-cli-proxy.pool; do
    docker ps -aq --filter "label=$label" | xargs -r docker rm -f >/dev/null 2>&1 || true
  done
  docker volume ls -q --filter label=cloud-cli-proxy.host | xargs -r docker volume rm >/dev/null 2>&1 || true
  # A gateway's guard on its uplink port outlives a container removed behind the gateway's back: the guards
  # whose port is gone guard nothing.
  for table in $(nft list tables netdev 2>/dev/null | awk '$3 ~ /^ccp_uplink_/ { print $3 }'); do
    device=$(nft list table netdev "$table" | sed -n 's/.*device "\([^"]*\)".*/\1/p' | head -n 1)
    if [ -z "$device" ] || [ ! -e "/sys/class/net/$device" ]; then nft delete table netdev "$table" || true; fi
  done
}
cleanup
trap cleanup EXIT

mapfile -t files < <(test_files)
say "running ${#files[@]} test files on ${TEST_DATABASES}"
run_tests test-output/results.tap "${files[@]}"
