#!/usr/bin/env bash
# Configures and builds clover.cpp into build/ (Release; the tests and benchmarks too when their
# libraries are installed: scripts/setup.sh --test). Arguments go to the CMake configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
