#!/usr/bin/env bash
# Builds what the GPU machine runs (it has no Rust toolchain) into gpu-bundle/ (ignored by git;
# the device tool carries it): the `gpu_check`, `gpu_zoo` and `gpu_hybrid` tools, the `spillway` CLI and the
# CUDA backend's test binary, built with `--features cuda` for x86-64, stripped, and the ONNX node tests of the GPU ops, packed
# into gpu-bundle/gpu-bundle.tar.gz. Then, on the GPU machine: `scripts/gpu_run.sh OUT_DIR` (see there).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p spillway-tests --features cuda --bin gpu_check --bin gpu_zoo --bin gpu_hybrid
cargo build --release -p spillway-cli --features cuda --bin spillway
# The CUDA backend's tests (tests/tests/cuda_backend.rs), which check GPU sessions on a GPU.
cuda_tests="$(cargo test --release -p spillway-tests --features cuda --test cuda_backend --no-run 2>&1 \
  | grep -o 'target/release/deps/cuda_backend-[0-9a-f]*' | head -1)"
rm -rf gpu-bundle
mkdir -p gpu-bundle
for tool in target/release/gpu_check target/release/gpu_zoo target/release/gpu_hybrid target/release/spillway "$cuda_tests"; do
  cp "$tool" gpu-bundle/
  strip "gpu-bundle/$(basename "$tool")"
done
mv gpu-bundle/cuda_backend-* gpu-bundle/cuda_backend
# The ONNX backend node tests of the GPU ops (the GPU machine's onnx wheel has no test data),
# from this checkout's venv (scripts/venv.sh).
node_dir="$(.venv/bin/python -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/node"))' 2>/dev/null || true)"
rm -rf gpu-bundle/node
if [ -d "$node_dir" ]; then
  gpu-bundle/gpu_check --copy-node-tests "$node_dir" gpu-bundle/node
else
  echo "no .venv with onnx: the bundle has no node tests (run scripts/venv.sh first)"
fi
# Packed, so that the bundle and the working tree stay under the device tool's 64 MiB;
# scripts/gpu_run.sh unpacks it.
tar czf gpu-bundle.tar.gz -C gpu-bundle . && rm -rf gpu-bundle && mkdir gpu-bundle
mv gpu-bundle.tar.gz gpu-bundle/
ls -l gpu-bundle
