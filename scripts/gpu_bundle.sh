#!/usr/bin/env bash
# Builds what the GPU machine runs (it has no Rust toolchain) into gpu-bundle/ (ignored by git;
# the device tool carries it): the `gpu_check` and `gpu_zoo` tools, built with `--features cuda`
# for x86-64, stripped. Then, on the GPU machine: `scripts/gpu_run.sh OUT_DIR` (see there).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p spillway-tests --features cuda --bin gpu_check --bin gpu_zoo
mkdir -p gpu-bundle
for tool in gpu_check gpu_zoo; do
  cp target/release/$tool gpu-bundle/
  strip gpu-bundle/$tool
done
ls -l gpu-bundle
