#!/usr/bin/env bash
# ThreadSanitizer run of the code that runs on several threads at once: continuous batching of
# sessions driven from several threads (engine/batching tests, per-pass statistics), and the
# server's slots, queue and cancellation (the scheduler's end-to-end tests against a TSan build
# of `clover serve`), and the background pre-fault of the weights. Any report fails the run
# (halt_on_error). scripts/test.sh calls it; alone:
#   scripts/test-tsan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-tsan
echo "tsan: building (${BUILD}/)"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLOVER_TSAN=ON -DCLOVER_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target batching_test stop_and_limit_test engine_test weight_residency_test residency_test clover default_model >/dev/null
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=4"
export CLOVER_SOURCE_DIR="$PWD"
start=$(date +%s)
"$BUILD"/tests/engine/batching_test --gtest_brief=1
"$BUILD"/tests/engine/stop_and_limit_test --gtest_brief=1 --gtest_filter='SyntheticModelTest.LastPass*'
"$BUILD"/tests/engine/engine_test --gtest_brief=1 --gtest_filter='EngineTest.CancellingStopsGeneration:EngineTest.SecondTurnReusesTheCachedPrefix'
# The background pre-fault of the weights: its thread against passes, stop and join at shutdown.
"$BUILD"/tests/runtime/residency_test --gtest_brief=1
"$BUILD"/tests/engine/weight_residency_test --gtest_brief=1
# The server: slots on their own threads, the HTTP threads, cancellation by disconnecting clients.
tests/server/run_server_tests.sh "$BUILD"/bin/clover "$PWD" tests/server/scheduler.test.mjs
echo "tsan: clean ($(( $(date +%s) - start )) s)"
