#!/usr/bin/env bash
# The unit tier: the *.unit.test.ts files, which need Node.js and `npm ci` alone (no build, root, Docker,
# PostgreSQL, network lab, browser or tool outside node_modules) and run in seconds. Everything else is the
# integration tier, which the full suite (scripts/test.sh) runs with these. Closes with a line
# "N passed, N failed, N skipped".
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
# Files of this tier share nothing, so they run side by side. needs() refuses to be asked in this tier.
export TEST_TIER=unit TEST_DATABASES=sqlite TEST_CONCURRENCY="$(nproc)"
mapfile -t files < <(test_files unit)
say "running ${#files[@]} test files, unit tier"
run_tests test-output/unit.tap "${files[@]}"
