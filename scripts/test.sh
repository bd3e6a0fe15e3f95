#!/usr/bin/env bash
# The README's test command: install dependencies, build, run every test.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
bash scripts/build.sh
export INGOT_BIN="$root/build/src/cli/ingot"
export INGOT_SHARED="${INGOT_SHARED:-$root/../shared}"
ctest --test-dir build --output-on-failure -LE gpu -j"$(nproc)"
python3 -m pytest -q tests
# Sanitizer builds (ASan+UBSan, TSan) and short fuzz runs: docs/reliability.md.
bash scripts/test-sanitizers.sh
