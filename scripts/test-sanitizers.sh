#!/usr/bin/env bash
# The sanitizer and fuzzing jobs (scripts/test.sh runs this after the release
# tests; docs/reliability.md explains them):
#   1. build-asan/: clang, AddressSanitizer + UndefinedBehaviorSanitizer, every
#      unit-test binary (no CUDA) plus the libFuzzer targets (one build: the
#      libraries carry fuzzer coverage instrumentation either way); ctest.
#   2. each fuzz target for INGOT_FUZZ_SECONDS (default 5) over its seed corpus
#      in fuzz/corpus/<target>/; any crash, leak, timeout or sanitizer report fails.
#   3. build-tsan/: clang, ThreadSanitizer, the engine (scheduler), server and tensor-parallel unit tests.
# Usage: scripts/test-sanitizers.sh [asan|fuzz|tsan ...]   (default: all three)
# ASan at -O0 (five slow-test modules at -O1: cmake/ingot.cmake), TSan at -O1, line tables only: -O0 halves the ASan build on two
# cores (its tests run ~3x slower, a smaller cost; docs/reliability.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(asan fuzz tsan)
jobs="$(nproc)"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

configure() {  # dir, sanitizers, optimization, extra cmake args...
  local dir="$1" san="$2" opt="$3"
  shift 3
  cmake -S "$root" -B "$root/$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$opt -gline-tables-only" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$opt -gline-tables-only" \
    -DINGOT_CUDA=OFF -DINGOT_WERROR=ON -DINGOT_SANITIZE="$san" "${launcher[@]}" "$@" >/dev/null
}

# Unit-test binaries (ctest names are these without the test_ prefix).
unit_tests=(test_tensor test_backend_cpu test_backend_cpu_models test_io test_audio test_quant test_kv test_kv_model
            test_models test_speech test_sampling test_engine test_tokenizer test_template test_server test_grammar
            test_parallel test_registry test_cli_chat test_loadgen)
tsan_tests=(test_engine test_server test_parallel)
fuzzers=(safetensors gguf tokenizer_json chat_template http_routes multipart audio kv_snapshot completion_stream)

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
ctest_regex() { local IFS='|'; local names=("${@#test_}"); echo "^(${names[*]})\$"; }

for step in "${steps[@]}"; do
  case "$step" in
    asan)
      configure build-asan address,undefined -O0 -DINGOT_FUZZ=ON
      ninja -C build-asan -j"$jobs" "${unit_tests[@]}" fuzzers
      # The fit tests run the CLI binary (not built here) and compare predicted with measured
      # RSS, which ASan's shadow memory inflates; they run in the release build. So do the
      # speculation goldens (whole golden models decoded twice: minutes at -O0, and the
      # engine code they reach is the Speculation.* tests' own).
      GTEST_FILTER='-Fit.*:SpeculationGolden.*' ctest --test-dir build-asan --output-on-failure -j"$jobs" -R "$(ctest_regex "${unit_tests[@]}")"
      ;;
    fuzz)
      out="$(mktemp -d)"
      trap 'rm -rf "$out"' EXIT
      mkdir -p "$out/kv_snapshot" build-asan/fuzz-artifacts
      build-asan/fuzz/make_kv_snapshot_seed "$out/kv_snapshot"
      for f in "${fuzzers[@]}"; do
        # New inputs go to a scratch dir; the committed corpus stays read-only.
        mkdir -p "$out/new-$f"
        dirs=("$out/new-$f" "fuzz/corpus/$f")
        [ "$f" = kv_snapshot ] && dirs+=("$out/kv_snapshot")
        echo "fuzz_$f: ${INGOT_FUZZ_SECONDS:-5} s"
        build-asan/fuzz/fuzz_"$f" -max_total_time="${INGOT_FUZZ_SECONDS:-5}" -timeout=10 -rss_limit_mb=2048 \
          -print_final_stats=1 -artifact_prefix="$root/build-asan/fuzz-artifacts/" "${dirs[@]}" 2>"$out/$f.log" \
          || { tail -n 60 "$out/$f.log"; echo "fuzz_$f failed; the input is in the log above"; exit 1; }
        grep -E "^stat::(number_of_executed_units|peak_rss_mb)" "$out/$f.log" | tr '\n' ' '; echo
      done
      ;;
    tsan)
      configure build-tsan thread -O1
      ninja -C build-tsan -j"$jobs" "${tsan_tests[@]}"
      # As above: the fit tests run in the release build.
      GTEST_FILTER='-Fit.*' ctest --test-dir build-tsan --output-on-failure -j"$jobs" -R "$(ctest_regex "${tsan_tests[@]}")"
      ;;
    *) echo "unknown step $step (asan, fuzz, tsan)"; exit 2 ;;
  esac
done
