#!/usr/bin/env bash
# Builds the CPU code with ThreadSanitizer (gcc, in build-tsan/) and runs what uses threads: the worker
# thread's unit tests, the translator group's end-to-end cases (engines on threads of their own, each with
# its text worker), and the CLI on a few lines with a small budget (many hand-offs to the text worker).
# Any report fails the run. Not part of CI (the build takes minutes); run it after touching threads.
# Usage: scripts/tsan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build-tsan

scripts/install_deps.sh
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DSEQTRANS_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -O1" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
fi
cmake --build "$build_dir" -j "$(nproc)" --target seqtrans seqtrans_unit_tests seqtrans_e2e_tests

# One BLAS thread: OpenBLAS's own threads are not instrumented and would only add noise.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" OPENBLAS_NUM_THREADS=1
"$build_dir/test/seqtrans_unit_tests" "a worker thread*"
"$build_dir/test/seqtrans_e2e_tests" "[group]"
printf 'A dog runs.\n\nTwo men are talking in a park.\n   \nA woman reads a book.\n' |
  "$build_dir/seqtrans" translate --device cpu --threads 1 --max-batch-size 1 >/dev/null
echo "tsan: no reports"
