#!/usr/bin/env bash
# The README's test command: install dependencies, build, run every test.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
bash scripts/build.sh
# The embedding API: install the package, then build examples/ against it alone
# (tests/test_embedding_api.py runs the result).
cmake --install build --prefix "$root/build/install" >/dev/null
cmake -S examples -B build/examples -G Ninja -DCMAKE_PREFIX_PATH="$root/build/install" >/dev/null
ninja -C build/examples
export INGOT_BIN="$root/build/src/cli/ingot"
export INGOT_SHARED="${INGOT_SHARED:-$root/../shared}"
ctest --test-dir build --output-on-failure -LE gpu -j"$(nproc)"
python3 -m pytest -q tests
# Sanitizer builds (ASan+UBSan, TSan) and short fuzz runs: docs/reliability.md.
bash scripts/test-sanitizers.sh
