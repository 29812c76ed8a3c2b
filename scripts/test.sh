#!/usr/bin/env bash
# Runs every test of clover.cpp: installs what is missing, the test tooling included
# (scripts/setup.sh --test), builds with the tests, then runs
# CTest (C++ unit tests, the llama.cpp oracle tests, the PyTorch reference tests, the server's
# end-to-end tests and the attack suite), then the libFuzzer targets for a bounded time
# (build-fuzz/; CLOVER_SKIP_FUZZ=1 leaves them out), then the ThreadSanitizer run of the batching,
# engine and server tests (scripts/test-tsan.sh, build-tsan/; CLOVER_SKIP_TSAN=1 leaves it out).
# CLOVER_SANITIZERS=1 adds the ASan/UBSan run of the server's and the engine's tests (build-asan/:
# a whole second build, several minutes here).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
scripts/build.sh -DCLOVER_BUILD_TESTS=ON
(cd build && ctest --output-on-failure --timeout 1500 -j"$(nproc)" "$@")
[ "${CLOVER_SKIP_FUZZ:-0}" = 1 ] || scripts/fuzz.sh "${CLOVER_FUZZ_SECONDS:-20}"
[ "${CLOVER_SKIP_TSAN:-0}" = 1 ] || scripts/test-tsan.sh
if [ "${CLOVER_SANITIZERS:-0}" = 1 ]; then scripts/test-sanitizers.sh; fi
