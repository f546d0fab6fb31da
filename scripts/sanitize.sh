#!/usr/bin/env bash
# Builds the CPU code with AddressSanitizer + UndefinedBehaviorSanitizer (clang, in build-sanitize/) and
# runs the unit, ops and search suites under them; any report fails the run. The same build holds the
# libFuzzer targets that scripts/fuzz.sh runs.
# The e2e suite is left out: it converts checkpoints with Python and runs the CLI hundreds of times,
# which under ASan would add many minutes to CI; the fuzzers cover the CLI's input readers instead.
# Usage: scripts/sanitize.sh [--build-only]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build-sanitize

scripts/install_deps.sh clang libclang-rt-dev
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DSEQTRANS_WITH_CUDA=OFF -DSEQTRANS_SANITIZE=ON -DSEQTRANS_FUZZ=ON >/dev/null
fi
cmake --build "$build_dir" -j "$(nproc)" --target seqtrans_unit_tests seqtrans_ops_tests seqtrans_search_tests \
  model_file_fuzzer tokenizer_fuzzer line_reader_fuzzer
[ "${1:-}" = "--build-only" ] && exit 0

# halt_on_error and -fno-sanitize-recover make the first report fail its test.
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ctest --test-dir "$build_dir" --output-on-failure -R '^(unit|ops|search)$'
