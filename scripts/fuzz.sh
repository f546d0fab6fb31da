#!/usr/bin/env bash
# Runs each libFuzzer target (test/fuzz: model file reader, tokenizer, line reader) for SECONDS
# (default 60) with ASan + UBSan, starting from its seed corpus test/fuzz/corpus/<target>. Inputs the
# fuzzer finds go to build-sanitize/fuzz-corpus/<target>; a finding stops that target with its input
# saved as build-sanitize/fuzz-findings/<target>-crash-* (rerun: build-sanitize/test/fuzz/<target> FILE).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(model_file_fuzzer tokenizer_fuzzer line_reader_fuzzer)
build_dir=build-sanitize

scripts/sanitize.sh --build-only
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
mkdir -p "$build_dir/fuzz-findings"
passed=0 failed=0
for target in "${targets[@]}"; do
  corpus="$build_dir/fuzz-corpus/$target"
  log="$build_dir/fuzz-findings/$target.log"
  mkdir -p "$corpus"
  echo "fuzz: $target for ${seconds}s" >&2
  if "$build_dir/test/fuzz/$target" "$corpus" "test/fuzz/corpus/$target" -max_total_time="$seconds" -timeout=20 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$build_dir/fuzz-findings/$target-" >"$log" 2>&1; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    tail -n 40 "$log" >&2
  fi
  executions=$(grep -o 'number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  echo "fuzz: $target: $executions executions, corpus $(ls "$corpus" | wc -l) files (log: $log)" >&2
done
echo "fuzz: $passed passed, $failed failed"
((failed == 0))
