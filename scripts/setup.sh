#!/usr/bin/env bash
# Installs what seqtrans needs to build and test on a fresh Debian/Ubuntu machine, then builds it.
# Idempotent: packages already present are skipped. Usage: scripts/setup.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}

scripts/install_deps.sh

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build_dir" -j "$(nproc)"
