#!/usr/bin/env bash
# Sets up a fresh machine, builds seqtrans and runs every test that needs no GPU: the C++ tests (ctest),
# then the Python package's (pytest, Ray recipe included).
# On a machine with a GPU, run `ctest --test-dir build -L gpu` as well.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
ctest --test-dir build --output-on-failure -LE gpu "$@"

# The Python package, built into the same build directory, so that only the extension compiles (the
# libraries are already there), and installed with its test and Ray extras into a virtualenv beside it.
# Without build isolation: the build directory keeps using the virtualenv's nanobind.
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q "scikit-build-core>=0.10" "nanobind>=2.0"
.venv/bin/python -m pip install -q --no-build-isolation --config-settings=build-dir=build ".[test,ray]"
SEQTRANS_CLI="$PWD/build/seqtrans" .venv/bin/python -m pytest -q -p no:cacheprovider test/python
