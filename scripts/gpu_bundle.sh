#!/usr/bin/env bash
# Builds what the GPU machine runs (it has no Rust toolchain) into gpu-bundle/ (ignored by git;
# the device tool carries it): the `gpu_check` tool, built with `--features cuda` for x86-64,
# stripped. Then, on the GPU machine: `scripts/gpu_run.sh OUT_DIR` (see there).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p spillway-tests --features cuda --bin gpu_check
mkdir -p gpu-bundle
cp target/release/gpu_check gpu-bundle/
strip gpu-bundle/gpu_check
ls -l gpu-bundle
