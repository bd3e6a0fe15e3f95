#!/usr/bin/env bash
# Configures and builds ingot into build/ (extra args go to cmake).
# The CUDA backend is built whenever the CUDA toolkit is installed
# (INGOT_CUDA=0 turns it off); without a GPU at run time ingot uses the CPU.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cuda_flags=()
nvcc="$(command -v nvcc || true)"
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ "${INGOT_CUDA:-auto}" != "0" ] && [ -n "$nvcc" ]; then
  cuda_flags=(-DINGOT_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc")
fi
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda_flags[@]}" "$@" >/dev/null
ninja -C "$root/build"
