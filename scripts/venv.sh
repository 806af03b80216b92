#!/usr/bin/env bash
# Creates (or reuses) the project-local Python venv at .venv with the pinned
# packages the tests use: onnx 1.22.0 (its backend node tests and light models),
# onnxruntime 1.31.1 (the oracle's shared library) and NVIDIA's NVRTC 13.0 (the CUDA
# backend's kernel sources are compiled by it in the tests; no GPU needed). Idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.spillway-requirements"
want="$(cat "$root/scripts/requirements.txt")"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/scripts/requirements.txt"
printf '%s' "$want" > "$stamp"
