#!/usr/bin/env bash
# Builds the `spillway` Python package (python/: pyo3 + maturin, an abi3 wheel for CPython
# 3.11+) and installs it into the project venv (.venv, made by scripts/venv.sh, which also
# installs the pinned maturin and pytest). Idempotent: cargo rebuilds only what changed.
#
#   scripts/python.sh            # release build (what a user gets; what the benchmarks use)
#   scripts/python.sh --debug    # the dev profile: a faster build (the test suite needs none:
#                                # python/tests/pytest.rs embeds the module cargo test builds)
#   scripts/python.sh --wheel    # also writes the wheel to target/wheels/
#   SPILLWAY_PY_FEATURES=cuda scripts/python.sh   # with the CUDA backend
#
# Then: .venv/bin/python -m pytest python/tests
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/venv.sh"
profile=(--release)
wheel=0
for arg in "$@"; do
  case "$arg" in
    --debug) profile=() ;;
    --wheel) wheel=1 ;;
    *) echo "usage: $0 [--debug] [--wheel]" >&2; exit 2 ;;
  esac
done
features=()
if [ -n "${SPILLWAY_PY_FEATURES:-}" ]; then
  features=(--features "$SPILLWAY_PY_FEATURES")
fi
export VIRTUAL_ENV="$root/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"
cd "$root/python"
if [ "$wheel" = 1 ]; then
  maturin build "${profile[@]}" "${features[@]}" --interpreter "$VIRTUAL_ENV/bin/python" --out "$root/target/wheels"
fi
# `develop` builds in place and installs the package (an editable install of python/spillway
# with the native module beside it).
maturin develop "${profile[@]}" "${features[@]}"
"$VIRTUAL_ENV/bin/python" -c "import spillway; print('spillway', spillway.__version__, 'installed in', '$VIRTUAL_ENV')"
