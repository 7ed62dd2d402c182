#!/usr/bin/env bash
# The fast tier: every test file, with whatever needs more than Node.js and SQLite skipped (test/support/needs.ts
# decides), so it runs in seconds without root, Docker, PostgreSQL, the network lab or a browser. Needs
# `npm ci` only. Closes with what was skipped and why, and a line "N passed, N failed, N skipped".
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
# Files of this tier share nothing, so they run side by side.
export TEST_TIER=unit TEST_DATABASES=sqlite TEST_CONCURRENCY="$(nproc)"
mapfile -t files < <(test_files)
say "running ${#files[@]} test files, unit tier (SQLite only)"
run_tests test-output/unit.tap "${files[@]}"
