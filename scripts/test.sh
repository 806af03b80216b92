#!/usr/bin/env bash
# The whole test suite on a fresh machine: creates the pinned Python venv (onnx 1.22.0 for the
# backend node tests, onnxruntime 1.31.1 as the oracle, tritonclient, pytest, maturin), then
# runs every Rust test, including the Python package's pytest suite (python/tests/pytest.rs
# embeds the interpreter and the native module this build compiled: no separate build), the
# server's and the ONNX conformance run, whose summary line per runtime configuration
# `conformance (…): N passed, M failed, K expected-fail` is printed with per-op counts. The
# CUDA backend is compiled in (feature `cuda`): on a machine without a GPU its tests check the
# typed errors and compile every generated kernel with NVRTC.
# The HiGHS MILP solver is compiled in too (feature `highs`; scripts/system-deps.sh installs
# cmake and libclang-dev from apt for its build). Then a short fuzzing smoke run (fuzz/smoke.sh)
# and, last, Miri on the arena code (scripts/miri.sh, which installs nightly's miri component).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step prints its wall and CPU time (the suite's time budget, step by step).
step() { local TIMEFORMAT="[test] %0R s (CPU %0U s user, %0S s sys): $*"; time "$@"; }
step scripts/system-deps.sh
step scripts/venv.sh
# Tests whose hardware is missing (AVX-512, a GPU, TensorRT) name themselves here.
export SPILLWAY_SKIPPED_LOG="$PWD/target/skipped-tests.txt"
mkdir -p target && : > "$SPILLWAY_SKIPPED_LOG"
step cargo test --workspace --all-targets --no-fail-fast \
  --features spillway-tests/cuda,spillway-placement/highs -- --nocapture
# On a CPU with AVX-512 the run above takes it; the blocked kernels' and Winograd's AVX2 paths
# run again here, with the packed GEMM held to AVX2 (the diagnostics knob SPILLWAY_GEMM, which
# sets what the default GEMM option `auto` means; see `spillway knobs`), so that every machine
# tests both.
if grep -qw avx512f /proc/cpuinfo; then
  # Libraries and test targets only: the criterion bench takes one filter, not three.
  # The conformance harness runs here too, on the sequential CPU only (the Virtual-device
  # configuration tests placement and copies, which the GEMM's instruction set does not change).
  step env SPILLWAY_CONFORMANCE_RUNTIME=cpu SPILLWAY_GEMM=avx2 cargo test --workspace --lib --tests --no-fail-fast \
    --features spillway-tests/cuda,spillway-placement/highs -- blocked packed_gemm winograd
fi
# The fuzz targets on their committed corpus and a fixed set of mutations (libFuzzer with
# AddressSanitizer, seed 1; fuzz/smoke.sh installs cargo-fuzz when missing).
step fuzz/smoke.sh
step scripts/miri.sh
echo "hardware-dependent tests that skipped their checks: $(sort -u "$SPILLWAY_SKIPPED_LOG" | wc -l)"
sort -u "$SPILLWAY_SKIPPED_LOG"
