#!/usr/bin/env bash
# Miri on the arena code: the memory planners and the executor's buffer recycling under
# overlapping multi-device runs (engine/src/exec/arena_tests.rs), interpreted with every access
# checked for undefined behaviour and data races. Installs Rust nightly's `miri` component
# (and nightly itself when missing) through rustup.
#
# Flags: Tree Borrows, because crossbeam-epoch (under rayon and the lock-free queues) breaks
# Stacked Borrows' rules but not Tree Borrows' (crossbeam's own Miri CI uses it); leaks are not
# checked because rayon's pool threads outlive the test by design (valgrind covers leaks:
# benches/results/leak-check-2026-11-22.md).
set -euo pipefail
cd "$(dirname "$0")/.."
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
rustup component add --toolchain nightly miri rust-src
MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-ignore-leaks" \
  cargo +nightly miri test -p spillway --lib -- memory:: exec::arena_tests
