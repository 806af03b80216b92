#!/usr/bin/env bash
# A long fuzzing campaign of one target on one core: restarts the fuzzer after each crash
# (the reproducer stays in fuzz/artifacts/<target>/) until SECONDS_TOTAL have passed, then
# prints the executions summed over the runs. New inputs go to fuzz/corpus-work/<target>
# (ignored by git; merge the useful ones into fuzz/corpus/<target> with -merge=1).
#
#   SECONDS_TOTAL=3600 fuzz/campaign.sh graph_gen [extra libFuzzer flags]
set -uo pipefail
cd "$(dirname "$0")"
t="$1"
shift
total="${SECONDS_TOTAL:-3600}"
bin="target/x86_64-unknown-linux-gnu/release/$t"
mkdir -p "corpus-work/$t" "corpus/$t" "artifacts/$t"
start=$(date +%s)
execs=0
runs=0
while :; do
    left=$((total - ($(date +%s) - start)))
    [ "$left" -le 5 ] && break
    log="$(mktemp)"
    "$bin" "corpus-work/$t" "corpus/$t" -max_total_time="$left" -timeout=10 \
        -rss_limit_mb=4096 -malloc_limit_mb=2048 -artifact_prefix="artifacts/$t/" \
        -print_final_stats=1 "$@" >"$log" 2>&1
    runs=$((runs + 1))
    n=$(grep -oE "stat::number_of_executed_units: [0-9]+" "$log" | grep -oE "[0-9]+$" | tail -1)
    execs=$((execs + ${n:-0}))
    grep -E "^#[0-9]+.*(pulse|DONE)" "$log" | tail -1
    grep -E "panicked at|ERROR: libFuzzer|Test unit written" "$log" | head -3
    cp "$log" "artifacts/$t/last-run.log"
    rm -f "$log"
done
echo "$t: $runs runs, $execs executions in ${total}s"
