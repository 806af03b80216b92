#!/usr/bin/env bash
# The differential fuzzer (tests/src/bin/diff_fuzz.rs) over COUNT seeds from FIRST, resumed
# after each seed whose graph crashes ONNX Runtime itself (a SIGSEGV inside libonnxruntime
# ends the process; the seed is printed and skipped). Findings: one line each on stdout and
# their models in OUT_DIR.
#
#   scripts/diff_fuzz.sh 7800 20000 diff_fuzz_findings
set -uo pipefail
cd "$(dirname "$0")/.."
first="${1:-0}"
count="${2:-10000}"
out="${3:-diff_fuzz_findings}"
end=$((first + count))
cargo build -p spillway-tests --bin diff_fuzz
mkdir -p "$out"
while [ "$first" -lt "$end" ]; do
    target/debug/diff_fuzz "$first" $((end - first)) "$out"
    rc=$?
    if [ "$rc" -le 1 ]; then
        break
    fi
    crashed="$(cat "$out/current-seed")"
    echo "seed $crashed: ONNX Runtime crashed (exit $rc); resuming after it"
    first=$((crashed + 1))
done
