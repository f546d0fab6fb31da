#!/usr/bin/env bash
# Sets up a fresh machine, builds seqtrans and runs every test that needs no GPU.
# On a machine with a GPU, run `ctest --test-dir build -L gpu` as well.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
ctest --test-dir build --output-on-failure -LE gpu "$@"
