#!/usr/bin/env bash
# Iteration-level against batch-level (shrinking) batching on a real file, on the GPU machine: throughput
# and memory of whole runs, graph recordings of a first run, and the arrival simulation's latency against
# offered load. Writes JSON reports to OUT_DIR and prints their tables.
# Usage: scripts/bench_batching.sh SEQTRANS_BINARY INPUT OUT_DIR [RATES] [extra bench flags...]
set -euo pipefail
binary=$1 input=$2 out=$3
rates=${4:-50,100,200,400,800}
shift $(($# < 4 ? $# : 4))
mkdir -p "$out"
for mode in shrinking iteration; do
  echo "=== $mode: first run (graph recordings over the whole file)"
  "$binary" bench -i "$input" --device cuda --batching "$mode" --runs 1 --warmup 0 "$@" --json "$out/first_$mode.json" |
    grep -E "line latency|memory|target tok"
  echo "=== $mode: median of 3 runs after 1 warm-up"
  "$binary" bench -i "$input" --device cuda --batching "$mode" "$@" --json "$out/runs_$mode.json"
done
echo "=== arrival simulation at $rates lines/s"
"$binary" bench -i "$input" --device cuda --arrival-rate "$rates" "$@" --json "$out/arrivals.json"
