#!/usr/bin/env bash
# Runs every fuzz target for a fixed number of executions (the committed corpus and a few
# thousand mutations from seed 1: the same inputs on every machine), at most SECONDS_EACH
# (default 60) each, for CI. New inputs go to a temporary folder, so the committed corpus is left as it is; a crash
# fails the script, leaving its reproducer under fuzz/artifacts/<target>/.
#
#   fuzz/smoke.sh            # every target, 20 s each
#   SECONDS_EACH=60 fuzz/smoke.sh graph_gen
#
# Installs what it needs: the nightly toolchain (rustup) and cargo-fuzz (cargo install). The
# targets are built unoptimized (`--dev`: 3.6 min on 2 cores against 43 for the release
# build, debug assertions and overflow checks on) with AddressSanitizer, and run with a fixed
# seed (`-seed=1`); long campaigns use the release build (fuzz/campaign.sh).
set -euo pipefail
cd "$(dirname "$0")"
each="${SECONDS_EACH:-60}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(model_bytes graph_gen npy tensor_proto)
fi
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
cargo +nightly fuzz build --dev
# Executions per target: about 20 s of each on this project's 2-core machine.
runs_for() {
    case "$1" in
        model_bytes) echo 1300 ;;
        graph_gen) echo 1500 ;;
        npy) echo 9000 ;;
        *) echo 60000 ;;
    esac
}
for t in "${targets[@]}"; do
    work="$(mktemp -d)"
    mkdir -p "corpus/$t" "artifacts/$t"
    echo "== $t ($(runs_for "$t") runs, at most ${each}s)"
    set +e
    "target/x86_64-unknown-linux-gnu/debug/$t" "$work" "corpus/$t" \
        -runs="$(runs_for "$t")" -max_total_time="$each" -timeout=10 -rss_limit_mb=4096 -malloc_limit_mb=2048 \
        -artifact_prefix="artifacts/$t/" -print_final_stats=1 -seed=1 >"$work.log" 2>&1
    status=$?
    set -e
    grep -E "^(#|==|stat::|SUMMARY|Done)|panicked|ERROR" "$work.log" | tail -n 12
    rm -rf "$work" "$work.log"
    if [ "$status" -ne 0 ]; then
        echo "fuzz target $t failed (exit $status): see fuzz/artifacts/$t/" >&2
        exit "$status"
    fi
done
