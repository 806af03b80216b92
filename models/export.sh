#!/usr/bin/env bash
# The one command that builds the model zoo: makes (or reuses) the venv .venv-zoo at the repo
# root with the pinned packages of models/zoo-requirements.txt (all from PyPI), then runs
# models/export_zoo.py, which writes models/zoo/<name>.onnx and models/zoo/manifest.json.
#
#   models/export.sh [--only NAME[,NAME]] [--skip-existing] [--list]
#   models/export.sh --check        # runs models/check_zoo.py instead (ORT smoke test + counts)
#
# PYTHON picks the interpreter that creates the venv (default python3, needs >= 3.10).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV="$ROOT/.venv-zoo"
REQ="$ROOT/models/zoo-requirements.txt"
if [ ! -x "$VENV/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$VENV"
fi
stamp="$VENV/.zoo-requirements.sha256"
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -r "$REQ"
    echo "$want" > "$stamp"
fi
if [ "${1:-}" = "--check" ]; then
    shift
    exec "$VENV/bin/python" "$ROOT/models/check_zoo.py" "$@"
fi
exec "$VENV/bin/python" "$ROOT/models/export_zoo.py" "$@"
