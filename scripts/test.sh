#!/usr/bin/env bash
# Sets up a fresh machine, builds seqtrans and runs every test that needs no GPU; then the unit, ops and
# search suites again under ASan + UBSan (scripts/sanitize.sh) and each fuzz target for
# $SEQTRANS_FUZZ_SECONDS seconds, default 60 (scripts/fuzz.sh). Any sanitizer report fails the run.
# On a machine with a GPU, run `ctest --test-dir build -L gpu` as well.
# Usage: scripts/test.sh [--quick] [CTEST_ARGUMENT...]   (--quick: the first stage only)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi
scripts/setup.sh build
ctest --test-dir build --output-on-failure -LE gpu "$@"
((quick)) && exit 0
scripts/sanitize.sh
scripts/fuzz.sh "${SEQTRANS_FUZZ_SECONDS:-60}"
