#!/usr/bin/env bash
# Runs every test of clover.cpp: installs what is missing (scripts/setup.sh), builds, then runs
# CTest (C++ unit tests, the llama.cpp oracle tests, the PyTorch reference tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure --timeout 1500 -j"$(nproc)" "$@"
