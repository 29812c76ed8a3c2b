#!/bin/bash
# Throughput of `clover patch` against plain `cp` of the same multi-GB official file, in one run.
#
#   bench/patch_vs_cp.sh [IN.gguf]          (docs/patch.md has the numbers)
#
# Without IN, writes a synthetic official file (`clover synth --preset slice --type q8_0 --layout
# official`, ~3 GB) into $WORK and deletes it at the end. Each repetition times, on the same file,
# alternating which goes first:
#   cp        cp IN OUT                    (the data may still be dirty in the page cache)
#   cp+sync   cp IN OUT && sync OUT        (durable, like the patch)
#   patch     clover patch IN OUT          (fsyncs OUT before renaming it into place; --copy auto,
#                                          which is read/write with a 1 MiB buffer on local filesystems)
#   patch-cfr clover patch --copy kernel   (the same through copy_file_range)
# As root, the page cache is dropped before every timed command (DROP_CACHES=0 to keep it), so each
# one reads IN from disk. MB/s are IN's bytes (1e6) per second for all three.
#
# Environment: CLOVER_BIN (default build/bin/clover), WORK (default /work/patch-bench; must be on the
# filesystem to measure), REPS (default 3), DROP_CACHES (default 1 when root).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLOVER=${CLOVER_BIN:-$ROOT/build/bin/clover}
WORK=${WORK:-/work/patch-bench}
REPS=${REPS:-3}
DROP_CACHES=${DROP_CACHES:-$([ "$(id -u)" = 0 ] && echo 1 || echo 0)}

[ -x "$CLOVER" ] || { echo "no clover binary at $CLOVER (set CLOVER_BIN)" >&2; exit 2; }
mkdir -p "$WORK"
made_input=0
cleanup() {
  rm -f "$WORK/cp.out" "$WORK/patch.out"
  [ "$made_input" = 1 ] && rm -f "$IN"
  rmdir "$WORK" 2>/dev/null || true
}
trap cleanup EXIT

if [ $# -ge 1 ]; then
  IN=$1
else
  IN=$WORK/official-slice-q8_0.gguf
  # The input and two outputs must fit, with 2 GiB to spare.
  need_kb=$(( (3 * 3300 + 2048) * 1024 ))
  free_kb=$(df -Pk "$WORK" | awk 'NR==2 {print $4}')
  if [ "$free_kb" -lt "$need_kb" ]; then
    echo "not enough space in $WORK: $((free_kb / 1024)) MiB free, need $((need_kb / 1024)) MiB" >&2
    exit 2
  fi
  made_input=1
  echo "writing $IN (clover synth --preset slice --type q8_0 --layout official)..." >&2
  "$CLOVER" synth -q "$IN" --preset slice --type q8_0 --layout official
fi
size=$(stat -c %s "$IN")
free_kb=$(df -Pk "$(dirname "$WORK/x")" | awk 'NR==2 {print $4}')
if [ $(( free_kb * 1024 )) -lt $(( 2 * size + (1 << 30) )) ]; then
  echo "not enough space in $WORK for two copies of $IN" >&2
  exit 2
fi

drop() {
  sync
  if [ "$DROP_CACHES" = 1 ]; then echo 3 > /proc/sys/vm/drop_caches; fi
}
now() { date +%s.%N; }
# Prints the seconds one command takes, after dropping the page cache; removes its output after.
timed() {
  local out=$1; shift
  rm -f "$out"; drop
  local t0 t1
  t0=$(now); "$@"; t1=$(now)
  echo "$t0 $t1" | awk '{printf "%.3f", $2 - $1}'
}
run_cp() { timed "$WORK/cp.out" cp --reflink=never "$IN" "$WORK/cp.out"; }
run_cp_sync() { timed "$WORK/cp.out" sh -c 'cp --reflink=never "$1" "$2" && sync "$2"' _ "$IN" "$WORK/cp.out"; }
run_patch() { timed "$WORK/patch.out" "$CLOVER" patch -q "$IN" "$WORK/patch.out" --target qwen35moe; }
run_patch_cfr() { timed "$WORK/patch.out" "$CLOVER" patch -q "$IN" "$WORK/patch.out" --target qwen35moe --copy kernel; }
mbs() { awk -v b="$size" -v s="$1" 'BEGIN {printf "%.0f", b / 1e6 / s}'; }

echo "file: $IN ($(awk -v b="$size" 'BEGIN {printf "%.2f GB", b / 1e9}')), filesystem $(df -PT "$WORK" | awk 'NR==2 {print $2}'), drop caches: $([ "$DROP_CACHES" = 1 ] && echo yes || echo no)"
printf "%-4s %-9s %10s %10s\n" rep what seconds MB/s
declare -A times=([cp]="" [cp_sync]="" [patch]="" [patch_cfr]="")
for rep in $(seq 1 "$REPS"); do
  if [ $((rep % 2)) = 1 ]; then order="cp cp_sync patch patch_cfr"; else order="patch_cfr patch cp_sync cp"; fi
  for what in $order; do
    s=$(run_$what)
    label=${what/cp_sync/cp+sync}
    printf "%-4s %-9s %10s %10s\n" "$rep" "${label/_/-}" "$s" "$(mbs "$s")"
    times[$what]="${times[$what]} $s"
  done
done
# Mean and median seconds per command; ratios are throughput ratios (time of cp / time of patch).
stats() { echo "$1" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR] = $1; s += $1} END {m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%f %f", s / NR, m}'; }
read -r cp_mean cp_med <<< "$(stats "${times[cp]}")"
read -r cs_mean cs_med <<< "$(stats "${times[cp_sync]}")"
read -r p_mean p_med <<< "$(stats "${times[patch]}")"
read -r k_mean k_med <<< "$(stats "${times[patch_cfr]}")"
for kind in mean median; do
  if [ $kind = mean ]; then c=$cp_mean cs=$cs_mean p=$p_mean k=$k_mean; else c=$cp_med cs=$cs_med p=$p_med k=$k_med; fi
  awk -v m="$kind" -v n="$REPS" -v b="$size" -v c="$c" -v cs="$cs" -v p="$p" -v k="$k" 'BEGIN {
    printf "%-6s of %d: cp %.0f MB/s, cp+sync %.0f, patch %.0f, patch-cfr %.0f; patch/cp %.2fx, patch/(cp+sync) %.2fx, patch-cfr/(cp+sync) %.2fx\n",
           m, n, b/1e6/c, b/1e6/cs, b/1e6/p, b/1e6/k, c/p, cs/p, cs/k }'
done
