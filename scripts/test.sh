#!/usr/bin/env bash
# Sets up a fresh machine, builds seqtrans and runs every test that needs no GPU: the C++ tests (ctest),
# then the Python package's (pytest, Ray recipe included); then the unit, ops and search suites again under
# ASan + UBSan (scripts/sanitize.sh) and each fuzz target for $SEQTRANS_FUZZ_SECONDS seconds, default 60
# (scripts/fuzz.sh). Any sanitizer report fails the run.
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

# The Python package, built into the same build directory, so that only the extension compiles (the
# libraries are already there), and installed with its test and Ray extras into a virtualenv beside it.
# Without build isolation: the build directory keeps using the virtualenv's nanobind.
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.0"
.venv/bin/python -m pip install -q --no-build-isolation --config-settings=build-dir=build ".[test,ray]"
SEQTRANS_CLI="$PWD/build/seqtrans" .venv/bin/python -m pytest -q -p no:cacheprovider test/python

scripts/sanitize.sh
scripts/fuzz.sh "${SEQTRANS_FUZZ_SECONDS:-60}"
