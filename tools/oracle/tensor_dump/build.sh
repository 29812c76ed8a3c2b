#!/bin/bash
# Builds llama.cpp v0.5.0 from the source bundle that node-llama-cpp ships (the same code as the
# prebuilt oracle; its logits were checked bit-identical) with the zen4 variant's instruction sets,
# and links tensor_dump against it. Investigation tooling, not part of the build or CI.
#   tools/oracle/tensor_dump/build.sh [WORKDIR]        (default /tmp/clover-llama-src; ~5 min on 2 cores)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
WORK=${1:-/tmp/clover-llama-src}
BUNDLE=$ROOT/node_modules/node-llama-cpp/llama/gitRelease.bundle
[ -f "$BUNDLE" ] || { echo "missing $BUNDLE: run npm ci" >&2; exit 2; }
[ -d "$WORK/.git" ] || git clone -q "$BUNDLE" "$WORK"
cmake -S "$WORK" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON \
  -DGGML_F16C=ON -DGGML_FMA=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON \
  -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF > "$WORK/cmake.log"
echo "building llama.cpp in $WORK/build ..." >&2
cmake --build "$WORK/build" -j"$(nproc)" --target llama > "$WORK/build.log"
L=$WORK/build
g++ -O2 -std=c++17 "$ROOT/tools/oracle/tensor_dump/tensor_dump.cpp" -I"$WORK/include" -I"$WORK/ggml/include" \
  -o "$WORK/tensor_dump" "$L/src/libllama.a" "$L/ggml/src/libggml.a" "$L/ggml/src/libggml-cpu.a" \
  "$L/ggml/src/libggml-base.a" -fopenmp -lpthread -ldl
echo "$WORK/tensor_dump" 
