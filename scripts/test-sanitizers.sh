#!/usr/bin/env bash
# ASan + UBSan run of the server's and the engine's unit tests (issue #26), in build-asan/.
# A separate build (gcc, -DCLOVER_SANITIZE=ON) of just those tests and what they link; ccache
# keeps a rerun cheap. Any sanitizer report fails the run (halt_on_error, no UBSan recovery).
#   scripts/test-sanitizers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TARGETS=(test_server_request_limits test_server_chat_output test_chat_depth engine_test batching_test)
t0=$(date +%s)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLOVER_SANITIZE=ON -DCLOVER_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS="-fno-sanitize-recover=undefined" >/dev/null
cmake --build build-asan -j"$(nproc)" --target "${TARGETS[@]}"
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export CLOVER_SOURCE_DIR="$PWD"
for t in "${TARGETS[@]}"; do
  bin=$(find build-asan/tests -type f -name "$t" -perm -u+x | head -n1)
  echo "sanitizers: $t"
  timeout 600 "$bin" --gtest_brief=1
done
echo "sanitizers: clean ($(( $(date +%s) - t0 )) s)"
