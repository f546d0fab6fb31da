#!/usr/bin/env bash
# Builds seqtrans on the GPU machine and checks the CUDA backend there: the [gpu] op tests, the
# compute-sanitizer memcheck and racecheck runs over them, and the kernel micro-benchmarks.
# Usage: cuda/run_gpu_checks.sh [STAGE...]   stages: build test bench memcheck racecheck (default: all)
# Logs go to $OUT (or ./gpu-logs); the build to $BUILD_DIR (default /tmp/seqtrans-gpu-build). Every stage
# ends by $DEADLINE seconds after the start (default 570, inside the device tool's 600 s per command).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-logs}
build=${BUILD_DIR:-/tmp/seqtrans-gpu-build}
mkdir -p "$out"
stages=("$@")
((${#stages[@]})) || stages=(build test bench memcheck racecheck)
tests="$build/test/seqtrans_ops_tests"
status=0
deadline=${DEADLINE:-570}

want() { [[ " ${stages[*]} " == *" $1 "* ]]; }
stage() { echo "=== $1 ($(date +%T))"; }
# Runs a stage under a time limit, logging to $out/NAME.log; a failure is recorded, not fatal.
run_logged() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS left=$((deadline - SECONDS))
  ((left < limit)) && limit=$left
  if ((limit < 15)); then
    echo "$name: skipped, no time left" | tee -a "$out/summary.txt"
    status=1
    return 1
  fi
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - start)) s" | tee -a "$out/summary.txt"
  ((rc == 0)) || status=1
  return $rc
}

if want build; then
  stage build
  {
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
    nvcc --version | tail -1
    cmake --version | head -1
  } | tee "$out/machine.txt"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/configure.log" 2>&1 ||
    { echo "configure failed"; tail -30 "$out/configure.log"; exit 1; }
  run_logged build 420 cmake --build "$build" -j16 --target seqtrans_ops_tests ||
    { tail -40 "$out/build.log"; exit 1; }
  grep -E "CUDA backend|Catch2" "$out/configure.log" | head -3
fi

if want test; then
  stage test
  run_logged gpu_tests 240 "$tests" "[gpu],[cuda]" --durations yes
  tail -5 "$out/gpu_tests.log"
fi

if want bench; then
  stage bench
  # Twice: the spread between the two runs is the noise any comparison must beat.
  run_logged bench 180 env SEQTRANS_CUDA_BENCH=1 bash -c '"$0" "[cuda_bench]" && "$0" "[cuda_bench]"' "$tests"
  grep -vE "^(=|-|~|All tests|test cases|assertions|Filters|Randomness|$)" "$out/bench.log" | head -60
fi

if want memcheck; then
  stage memcheck
  run_logged memcheck 420 compute-sanitizer --tool memcheck --leak-check no --report-api-errors no --error-exitcode 3 "$tests" "[gpu]"
  grep -E "ERROR SUMMARY|test cases|assertions" "$out/memcheck.log" | tail -3
fi

if want racecheck; then
  stage racecheck
  run_logged racecheck 420 compute-sanitizer --tool racecheck --error-exitcode 3 "$tests" "[gpu]"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard|test cases|assertions" "$out/racecheck.log" | tail -4
fi

echo "=== summary"
cat "$out/summary.txt"
exit $status
