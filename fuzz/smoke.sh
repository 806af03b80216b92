#!/usr/bin/env bash
# Runs every fuzz target for a short time (default 20 s each) from the committed corpus, for
# CI. New inputs go to a temporary folder, so the committed corpus is left as it is; a crash
# fails the script, leaving its reproducer under fuzz/artifacts/<target>/.
#
#   fuzz/smoke.sh            # every target, 20 s each
#   SECONDS_EACH=60 fuzz/smoke.sh graph_gen
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
set -euo pipefail
cd "$(dirname "$0")"
each="${SECONDS_EACH:-20}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(model_bytes graph_gen npy tensor_proto)
fi
# Debug assertions (overflow checks included) on, AddressSanitizer (the default) on.
cargo +nightly fuzz build -a
for t in "${targets[@]}"; do
    work="$(mktemp -d)"
    mkdir -p "corpus/$t"
    echo "== $t (${each}s)"
    cargo +nightly fuzz run -a "$t" "$work" "corpus/$t" -- \
        -max_total_time="$each" -timeout=10 -rss_limit_mb=4096 -malloc_limit_mb=2048 \
        -print_final_stats=1 2>&1 | grep -E "^(#|==|stat::|SUMMARY|Done)|panicked|ERROR" | tail -n 12
    status=${PIPESTATUS[0]}
    rm -rf "$work"
    if [ "$status" -ne 0 ]; then
        echo "fuzz target $t failed (exit $status): see fuzz/artifacts/$t/" >&2
        exit "$status"
    fi
done
