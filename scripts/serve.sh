#!/usr/bin/env bash
# The README's main command: install dependencies, build, serve.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
bash scripts/build.sh
exec "$root/build/src/cli/ingot" serve "$@"
