#!/usr/bin/env bash
# Two spillway binaries on one zoo model, alternately (A B A B ...): each run's in-process
# median latency (`spillway run --repeat 20`, after its warm-up), the ratio A/B pair by pair,
# and their geometric mean. Loading and packing are left out, which whole-process timings
# (farm-bench) include.
#
# Usage: benches/latency_ab.sh MODEL THREADS ROUNDS BINARY_A BINARY_B
#   e.g. benches/latency_ab.sh googlenet 2 10 target/release/spillway /tmp/old/spillway
set -euo pipefail
model=$1 threads=$2 rounds=$3 a=$4 b=$5
latency() {
    RAYON_NUM_THREADS=$threads "$1" run "models/zoo/$model.onnx" --repeat 20 2>&1 |
        sed -n 's/.*median latency: \([0-9.]*\) ms.*/\1/p'
}
for _ in $(seq "$rounds"); do
    echo "$(latency "$a") $(latency "$b")"
done | awk '{ r = $1 / $2; printf "A %s ms  B %s ms  A/B %.3f\n", $1, $2, r; s += log(r); n++ }
            END { printf "geomean A/B %.3f over %d pairs\n", exp(s / n), n }'
