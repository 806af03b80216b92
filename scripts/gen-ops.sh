#!/usr/bin/env bash
# Regenerates the README's supported-operator list from the engine's op registry (`spillway ops`).
set -euo pipefail
cd "$(dirname "$0")/.."
list="$(cargo run --quiet -p spillway-cli -- ops)"
python3 - "$list" <<'PY'
import re, sys
text = open("README.md").read()
new = "<!-- ops:start -->\n" + sys.argv[1].strip() + "\n<!-- ops:end -->"
text = re.sub(r"<!-- ops:start -->.*?<!-- ops:end -->", lambda m: new, text, flags=re.S)
open("README.md", "w").write(text)
PY
