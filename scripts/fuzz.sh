#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, in build-fuzz/) and runs each for SECONDS
# (default 20: the CI run; give more for a real session) on its corpus. A crash leaves its input
# in build-fuzz/crashes/<target>/ and fails the run: copy it into the target's regression folder
# (tests/chat/fuzz/regressions/<t>/, tests/server/fuzz_corpus/, tests/gguf/fuzz_corpus/), where
# the ordinary test build replays it.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-20}
t0=$(date +%s)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCLOVER_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLOVER_BUILD_BENCH=OFF >/dev/null
declare -A CORPUS=(
  [fuzz_gguf_reader]=tests/gguf/fuzz_corpus
  [fuzz_chat_jinja]=tests/chat/fuzz/corpus/jinja
  [fuzz_chat_parser]=tests/chat/fuzz/corpus/parser
  [fuzz_chat_render]=tests/chat/fuzz/corpus/render
  [fuzz_server_request]=tests/server/fuzz_corpus
)
cmake --build build-fuzz -j"$(nproc)" --target "${!CORPUS[@]}"
fail=0
for t in "${!CORPUS[@]}"; do
  bin=$(find build-fuzz/tests -type f -name "$t" -perm -u+x | head -n1)
  mkdir -p "build-fuzz/crashes/$t" "build-fuzz/corpus/$t"
  echo "fuzz: $t for ${SECONDS_EACH} s"
  # The working corpus grows in build-fuzz/; the committed one is only read.
  if ! timeout $((SECONDS_EACH + 120)) "$bin" "build-fuzz/corpus/$t" "${CORPUS[$t]}" -max_total_time="$SECONDS_EACH" \
      -timeout=10 -rss_limit_mb=2048 -artifact_prefix="build-fuzz/crashes/$t/" -print_final_stats=1 2>"build-fuzz/$t.log"; then
    echo "fuzz: $t FAILED, see build-fuzz/$t.log and build-fuzz/crashes/$t/"; tail -n 30 "build-fuzz/$t.log"; fail=1
  else
    grep -E "stat::number_of_executed_units" "build-fuzz/$t.log" || true
  fi
done
echo "fuzz: done ($(( $(date +%s) - t0 )) s)"
exit $fail
