#!/usr/bin/env bash
# The prepared check for a real GPU (issue #20): is the Vulkan backend right on the card, and what
# do AR decoding, a denoising pass and block diffusion cost there. Built here, run there in one call.
#
#   bench/gpu-check.sh pack            here: gpu-check/ = the stripped clover, the Vulkan test
#                                      binaries and vulkan_ops_bench, every library they need that
#                                      is not glibc, and Debian's Vulkan loader (the GPU machine's
#                                      image has none); well under the device tool's 64 MiB carry
#   bench/gpu-check.sh run [--local] [--budget S] [--steps LIST]
#                                      there: find the NVIDIA Vulkan driver, list the devices, run
#                                      the Vulkan tests (results checked against the CPU executor;
#                                      the validation layer is not on that machine, so its silence
#                                      is not checked there), time the device layer, bench the
#                                      slice and the full-size clover-35b Q4_0 (written on the spot)
#                                      in AR and diffusion, the full-size file's memory ladder (24,
#                                      16, 12, 8 GB device budgets, experts of the first layers in
#                                      RAM on the CPU), prefill with experts in RAM computed by the
#                                      CPU or streamed to the card (--stream-experts 0, 8, 32) and
#                                      the card's copy bandwidth (PyTorch), and the GPU time by
#                                      shader (CLOVER_VK_PROFILE) of the slice's decode steps,
#                                      prefill and denoising passes.
#                                      Steps that would not fit in the budget (default 480 s) are
#                                      skipped and say so. --local: the same flow on lavapipe with
#                                      a tiny model (what CI runs: tests/bench/gpu_check_local).
#                                      --steps: a comma list of tests, opsbench, models (the
#                                      benches, ladder and streaming) and profile; default all.
#
# With the device tool (../.library/device/README.md):
#   bench/gpu-check.sh pack
#   run(command="bash bench/gpu-check.sh run", carry=["gpu-check"], timeout_s=560)
# Everything is printed and written to $OUT (the device tool brings it back): gpu-check.md (the
# table), *.json (clover bench), *.log. Numbers from it go into docs/vulkan.md with the date and the
# machine; none are written anywhere without such a run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PACK=${GPU_CHECK_PACK:-$ROOT/gpu-check}  # where pack writes and run reads
B=${CLOVER_BUILD_DIR:-build}
BINARIES=("$B/bin/clover" "$B/tests/backend/vulkan/vulkan_ops_test" "$B/tests/backend/vulkan/vulkan_executor_test"
          "$B/tests/backend/vulkan/vulkan_denoise_test" "$B/bench/vulkan_ops_bench")

die() { echo "gpu-check: $*" >&2; exit 2; }

pack() {
  for b in "${BINARIES[@]}"; do [ -x "$b" ] || die "missing $b: build with scripts/build.sh -DCLOVER_BUILD_TESTS=ON"; done
  rm -rf "$PACK" && mkdir -p "$PACK/bin" "$PACK/lib"
  for b in "${BINARIES[@]}"; do
    strip -o "$PACK/bin/$(basename "$b")" "$b"
    # Every shared library but glibc's own (the machine there has a newer glibc).
    ldd "$b" | awk '/=> \//{print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;
        *) [ -e "$PACK/lib/$(basename "$lib")" ] || cp -L "$lib" "$PACK/lib/" ;;
      esac
    done
  done
  # clover opens the Vulkan loader at run time (dlopen), so ldd does not list it.
  local loader
  loader=$(ldconfig -p | awk '/libvulkan.so.1 .*x86-64/ && !n++ {print $NF}')
  [ -n "$loader" ] || die "no libvulkan.so.1: scripts/setup.sh installs libvulkan-dev"
  cp -L "$loader" "$PACK/lib/libvulkan.so.1"
  # NVIDIA's Vulkan driver (libGLX_nvidia.so.0) needs glvnd's dispatch library, which a CUDA-only
  # image may lack (Debian: libglvnd0).
  local glvnd
  glvnd=$(ldconfig -p | awk '/libGLdispatch.so.0 .*x86-64/ && !n++ {print $NF}')
  [ -n "$glvnd" ] || die "no libGLdispatch.so.0: scripts/setup.sh installs libglvnd0 (through mesa-vulkan-drivers)"
  cp -L "$glvnd" "$PACK/lib/libGLdispatch.so.0"
  { echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)"; echo "packed $(date -u +%FT%TZ) on $(uname -m)";
    (cd "$PACK" && find . -type f -printf '%P %s\n' | sort); } > "$PACK/MANIFEST"
  local kib
  kib=$(du -sk "$PACK" | cut -f1)
  ((kib < 60 * 1024)) || die "the pack is $((kib / 1024)) MiB: over the 60 MiB kept under the carry limit"
  echo "gpu-check: packed $(ls "$PACK/bin" | wc -l) binaries and $(ls "$PACK/lib" | wc -l) libraries in $PACK ($((kib / 1024)) MiB)"
}

# --- run ------------------------------------------------------------------------------------------
LOCAL=0
BUDGET=480
STEPS=tests,opsbench,models,profile
want() { [[ ",$STEPS," == *",$1,"* ]]; }
START=$(date +%s)
elapsed() { echo $(($(date +%s) - START)); }
fits() { (($(elapsed) + $1 <= BUDGET)); }  # fits SECONDS: is there time left for a step of that size
left() { local l=$((BUDGET - $(elapsed) - 5)); ((l > $1)) && l=$1; ((l < 10)) && l=10; echo "$l"; }  # a timeout <= $1
ROWS=()  # the summary table's lines
EXTRA=()  # sections after the table
FAILURES=0  # steps that failed (a test, a bench): the exit status says so
row() { ROWS+=("| $1 | $2 |"); echo "gpu-check: $1: $2"; }

unpack_gl() {
  # The loader and glvnd packages the GPU machine's image lacks, carried as Debian .deb files in
  # .gl/ (the device tool's recipe: ../.library/device/README.md) and unpacked into / there.
  command -v nvidia-smi > /dev/null && [ -d "$ROOT/.gl" ] && ls "$ROOT"/.gl/*.deb > /dev/null 2>&1 || return 0
  local f
  for f in "$ROOT"/.gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  echo "gpu-check: unpacked $(ls "$ROOT"/.gl/*.deb | wc -l) loader packages from .gl" >&2
}

pick_driver() {
  # The first way of finding NVIDIA's Vulkan driver with which the loader lists a GPU: the loader's
  # own search, each manifest on the machine, then a manifest of our own naming the driver library
  # by its full path. Prints the manifest ("" for the loader's search); every try goes to the log.
  local log="$OUT/devices-debug.log" cands=("") j d l
  for j in /usr/local/nvidia/share/vulkan/icd.d/nvidia*.json /usr/share/vulkan/icd.d/nvidia*.json \
           /etc/vulkan/icd.d/nvidia*.json /usr/local/share/vulkan/icd.d/nvidia*.json; do
    [ -f "$j" ] && cands+=("$j")
  done
  mkdir -p "${TMPDIR:-/tmp}/gpu-check-icd"
  for l in libGLX_nvidia.so.0 libEGL_nvidia.so.0; do
    for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
      [ -e "$d/$l" ] || continue
      j="${TMPDIR:-/tmp}/gpu-check-icd/$(echo "$d/$l" | tr / _).json"
      printf '{"file_format_version": "1.0.1", "ICD": {"library_path": "%s", "api_version": "1.3.0"}}\n' "$d/$l" > "$j"
      cands+=("$j")
      { echo "== ldd $d/$l"; ldd "$d/$l"; } >> "$log" 2>&1 || true
    done
  done
  for j in "${cands[@]}"; do
    echo "== VK_DRIVER_FILES=${j:-(unset: the loader search)} ${j:+$(cat "$j")}" >> "$log"
    if [ -z "$j" ]; then
      env -u VK_DRIVER_FILES -u VK_ICD_FILENAMES VK_LOADER_DEBUG=error,warn,driver "$CLOVER" devices >> "$log" 2>&1 || true
      env -u VK_DRIVER_FILES -u VK_ICD_FILENAMES "$CLOVER" devices 2> /dev/null | grep '^vulkan:' | grep -qv 'CPU type' \
        && { echo ""; return 0; }
    else
      VK_DRIVER_FILES="$j" VK_ICD_FILENAMES="$j" VK_LOADER_DEBUG=error,warn,driver "$CLOVER" devices >> "$log" 2>&1 || true
      VK_DRIVER_FILES="$j" VK_ICD_FILENAMES="$j" "$CLOVER" devices 2> /dev/null | grep '^vulkan:' | grep -qv 'CPU type' \
        && { echo "$j"; return 0; }
    fi
  done
  return 1
}

gtest_summary() {  # LOG -> "N passed, M failed, K skipped"
  local p f s
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$1" | tail -1)
  echo "${p:-0} passed, ${f:-0} failed, ${s:-0} skipped"
}

bench_row() {  # NAME JSON: the bench numbers that matter, one line
  python3 - "$1" "$2" <<'EOF'
import json, sys
name, path = sys.argv[1], sys.argv[2]
rows = json.load(open(path))
parts = []
for r in rows:
    if r.get("test", "").startswith(("pp", "tg")):
        parts.append(f"{r['test']} {r.get('mode', 'ar')} {r['median_ts']:.1f} t/s")
    if "block_pass_ms" in r:
        parts.append(f"denoising pass {r['block_pass_ms']:.2f} ms = {r['block_pass_vs_ar_step']:.2f} AR steps, "
                     f"commit pass {r.get('commit_pass_ms', 0):.2f} ms = {r.get('commit_pass_vs_ar_step', 0):.2f} "
                     f"(AR step {r['ar_step_ms']:.2f} ms); distinct experts per layer: AR "
                     f"{r.get('experts_per_layer_ar', 0):.1f}, denoise {r.get('experts_per_layer_block', 0):.1f}, "
                     f"commit {r.get('experts_per_layer_commit', 0):.1f}")
    if "tokens_per_pass" in r:
        parts.append(f"{r['mode']} {r['tokens_per_pass']:.2f} tokens/pass")
if rows and rows[0].get("placement"):
    parts.append(f"placement: {rows[0]['placement']}")
print("; ".join(parts))
EOF
}

run_check() {
  OUT=${OUT:-/tmp/gpu-check-out}
  mkdir -p "$OUT"
  if ((LOCAL)); then pack; fi  # the pack itself is part of what --local checks
  [ -x "$PACK/bin/clover" ] || die "no $PACK: run 'bench/gpu-check.sh pack' here and carry gpu-check"
  export LD_LIBRARY_PATH="$PACK/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CLOVER_VULKAN_LIBRARY="$PACK/lib/libvulkan.so.1"
  export CLOVER_SOURCE_DIR="$ROOT"
  local CLOVER="$PACK/bin/clover" device filter models threads reps
  threads=$(nproc)
  row "machine" "$(uname -m), $threads cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), commit $(head -1 "$PACK/MANIFEST" | cut -d' ' -f2 | cut -c1-10)"

  if ((LOCAL)); then
    device=vulkan:0  # lavapipe, named (a CPU-type device is never picked by itself)
    export CLOVER_VK_TEST_DEVICE=0
    filter='VulkanLoader.*:VulkanExecutor.GreedyArMatchesTheCpuExecutor:VulkanSelection.*'  # a few, to check the flow
    reps=2
  else
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
      > "$OUT/nvidia-smi.txt" 2>&1 && row "nvidia-smi" "$(head -1 "$OUT/nvidia-smi.txt")"
    # The driver's EGL vendor file, where the machine mounts one (the device tool's recipe).
    [ -f /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json ] \
      && export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
    unpack_gl
    local icd
    if icd=$(pick_driver); then
      [ -n "$icd" ] && export VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd"
      row "Vulkan driver" "${icd:-the loader search}${icd:+ ($(grep -o '"library_path"[^,}]*' "$icd" | head -1))}"
    else
      row "Vulkan driver" "no way of loading NVIDIA's driver gave a GPU device (devices-debug.log lists each try)"
    fi
    export CLOVER_VK_TEST_NO_VALIDATION=1
    # The opt-in cases too slow for lavapipe (mid preset, long context) take seconds on a card.
    export CLOVER_VK_MID=1 CLOVER_VK_LONG=1
    device=vulkan
    filter='*'
    reps=20
  fi
  "$CLOVER" devices > "$OUT/devices.txt" 2>&1 || true
  cat "$OUT/devices.txt"
  if ! ((LOCAL)) && ! grep -q '^vulkan:' "$OUT/devices.txt"; then
    row "result" "no Vulkan GPU device: nothing to measure (see devices.txt, devices-debug.log)"
    finish; return 3
  fi
  if ! ((LOCAL)) && ! grep '^vulkan:' "$OUT/devices.txt" | grep -qv 'CPU type'; then
    row "result" "only CPU-type Vulkan devices: nothing to measure on a GPU (see devices.txt)"
    finish; return 3
  fi
  row "device" "$(grep -m1 '^vulkan:' "$OUT/devices.txt")"

  # The full-size file takes a minute or two of the machine's cores to write: start it now, beside
  # the tests (which mostly wait on the GPU), and wait for it where it is needed.
  local big="${TMPDIR:-/tmp}/gpu-check-clover-35b-q4_0.gguf" synth_pid=""
  if ! ((LOCAL)) && want models && [ ! -f "$big" ]; then
    (nice "$CLOVER" synth --preset clover-35b --type q4_0 --seed 35 -q "$big.part" > "$OUT/synth-clover-35b-q4_0.log" 2>&1 \
      && mv "$big.part" "$big") &
    synth_pid=$!
  fi

  # The card's copy bandwidth, the roofline the passes are measured against.
  if ! ((LOCAL)) && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    python3 - > "$OUT/copy_bandwidth.txt" 2>&1 <<'EOF' || true
import torch
x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
torch.cuda.synchronize()
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(10): y.copy_(x)
e.record(); torch.cuda.synchronize()
ms = s.elapsed_time(e) / 10
print(f"{2 * x.numel() / ms / 1e6:.0f} GB/s read+write ({torch.cuda.get_device_name()})")
EOF
    row "copy bandwidth (PyTorch)" "$(tail -1 "$OUT/copy_bandwidth.txt")"
  fi

  # Correctness on the device: every Vulkan test binary, checked against the CPU.
  local t
  for t in vulkan_ops_test vulkan_executor_test vulkan_denoise_test; do
    want tests || break
    if fits 60; then
      timeout "$(left 150)" "$PACK/bin/$t" --gtest_filter="$filter" > "$OUT/$t.log" 2>&1 || true
      row "$t" "$(gtest_summary "$OUT/$t.log")"
      grep -q '^\[  PASSED  \] [1-9]' "$OUT/$t.log" && ! grep -q '^\[  FAILED  \]' "$OUT/$t.log" || FAILURES=$((FAILURES + 1))
    else
      row "$t" "skipped: the time budget"
    fi
  done

  if want opsbench && fits 30; then
    timeout "$(left 60)" "$PACK/bin/vulkan_ops_bench" "${CLOVER_VK_TEST_DEVICE:-0}" "$reps" > "$OUT/vulkan_ops_bench.txt" 2>&1 || true
    row "device layer (vulkan_ops_bench)" "below"
    EXTRA+=("" "## vulkan_ops_bench" "" '```' "$(cat "$OUT/vulkan_ops_bench.txt")" '```')
  fi

  # Speed: AR, the denoising pass against the AR step, block diffusion.
  if ((LOCAL)); then
    models=("tiny:q4_0:-p 32 -n 8 -r 1")
  else
    # The slice in Q4_K_M too: the K-quant shaders on a real card (the files people download).
    models=("slice:q4_0:-p 512 -n 128 -r 3" "clover-35b:q4_0:-p 512 -n 128 -r 2" "slice:Q4_K_M:-p 512 -n 128 -r 2")
  fi
  want models || models=("${models[0]}")  # the profile's model alone
  want models || want profile || models=()
  local m name type bench_args need
  for m in "${models[@]}"; do
    IFS=: read -r name type bench_args <<< "$m"
    need=$([ "$name" = clover-35b ] && echo 240 || echo 60)
    if ! fits "$need"; then row "$name $type" "skipped: the time budget"; continue; fi
    local file="${TMPDIR:-/tmp}/gpu-check-$name-$type.gguf"  # not under $OUT: it would travel back
    local t0=$(date +%s)
    if [ "$file" = "$big" ] && [ -n "$synth_pid" ]; then
      wait "$synth_pid" || true
      synth_pid=""
      [ -f "$file" ] || { FAILURES=$((FAILURES + 1)); row "$name $type" "synth failed: $(tail -1 "$OUT/synth-$name-$type.log")"; continue; }
      row "$name $type file" "$(du -h "$file" | cut -f1), written beside the tests (done $(elapsed) s into the check)"
    else
      # shellcheck disable=SC2086
      [ -f "$file" ] || "$CLOVER" synth --preset "$name" --type "$type" --seed 35 -q "$file" > "$OUT/synth-$name-$type.log" 2>&1 \
        || { FAILURES=$((FAILURES + 1)); row "$name $type" "synth failed: $(tail -1 "$OUT/synth-$name-$type.log")"; continue; }
      row "$name $type file" "$(du -h "$file" | cut -f1), written in $(($(date +%s) - t0)) s"
    fi
    if want profile && [ "$m" = "${models[0]}" ]; then profile "$file"; fi
    if ! want models; then ((LOCAL)) && rm -f "$file"; continue; fi
    # shellcheck disable=SC2086
    if timeout "$(left 100000)" "$CLOVER" bench -m "$file" --device "$device" \
        $bench_args --mode ar,diffusion -t "$threads" --json -q > "$OUT/bench-$name-$type.json" 2> "$OUT/bench-$name-$type.log"; then
      row "$name $type on $device" "$(bench_row "$name" "$OUT/bench-$name-$type.json")"
      row "$name $type device memory" "$(grep -m1 -o 'device memory.*' "$OUT/bench-$name-$type.log" || echo 'not reported')"
    else
      FAILURES=$((FAILURES + 1))
      row "$name $type on $device" "bench failed or ran out of time: $(tail -2 "$OUT/bench-$name-$type.log" | tr '\n' ' ')"
    fi
    # The memory ladder (issue #21): the same file under smaller device budgets, routed experts of
    # the first layers in RAM computed by the CPU (--vram-budget picks the placement).
    if [ "$name" = clover-35b ] || ((LOCAL)); then ladder "$file"; stream "$file"; fi
    if ((LOCAL)); then rm -f "$file"; fi
  done
  finish
  if ((FAILURES)); then echo "gpu-check: $FAILURES step(s) failed (logs in $OUT)" >&2; return 1; fi
}

profile() {  # FILE: GPU time by shader (CLOVER_VK_PROFILE) of decode steps, a prefill, denoising passes
  local file=$1 what name args
  for what in "decode:-p 0 -n 32 --mode ar" "prefill:-p 512 -n 0 --mode ar" "diffusion:-p 0 -n 32 --mode diffusion"; do
    IFS=: read -r name args <<< "$what"
    if ! fits 30; then row "profile $name" "skipped: the time budget"; continue; fi
    # shellcheck disable=SC2086
    if CLOVER_VK_PROFILE=1 timeout "$(left 120)" "$CLOVER" bench -m "$file" --device "$device" $args -r 1 \
        -t "$threads" -q > /dev/null 2> "$OUT/profile-$name.txt" && grep -q '^vulkan profile' "$OUT/profile-$name.txt"; then
      row "profile $name" "$(grep -m1 '^vulkan profile' "$OUT/profile-$name.txt" | sed 's/^vulkan profile (CLOVER_VK_PROFILE): //')"
      EXTRA+=("" "## GPU time by shader: $name ($(basename "$file"), $args)" "" '```'
              "$(sed -n '/^vulkan profile/,$p' "$OUT/profile-$name.txt" | grep -v '^peak RSS' | head -75)" '```')
    else
      FAILURES=$((FAILURES + 1))
      row "profile $name" "failed: $(tail -2 "$OUT/profile-$name.txt" | tr '\n' ' ')"
    fi
  done
}

ladder() {  # FILE: tokens/s per device budget
  local file=$1 budgets budget flags tag
  if ((LOCAL)); then budgets=("n-cpu-moe 2"); else budgets=("24G" "16G" "12G" "8G"); fi
  for budget in "${budgets[@]}"; do
    if ! fits 40; then row "ladder $budget" "skipped: the time budget"; continue; fi
    if ((LOCAL)); then flags="--n-cpu-moe 2"; else flags="--vram-budget $budget"; fi
    tag=${budget// /-}
    # shellcheck disable=SC2086
    if timeout "$(left 100000)" "$CLOVER" bench -m "$file" --device "$device" $flags -p 128 -n 32 -r 1 --mode ar \
        -t "$threads" --json -q > "$OUT/ladder-$tag.json" 2> "$OUT/ladder-$tag.log"; then
      row "ladder $budget" "$(bench_row ladder "$OUT/ladder-$tag.json")"
    else
      FAILURES=$((FAILURES + 1))
      row "ladder $budget" "bench failed or ran out of time: $(tail -2 "$OUT/ladder-$tag.log" | tr '\n' ' ')"
    fi
  done
}

stream() {  # FILE: prefill tokens/s with experts in RAM computed by the CPU vs streamed to the device
  # (--stream-experts N: experts with N or more rows of a pass uploaded and computed there; 0:
  # never). The default threshold (32, llama.cpp's) is unmeasured until this runs on a card.
  local file=$1 flags n
  if ((LOCAL)); then flags="--n-cpu-moe 2"; else flags="--vram-budget 12G"; fi
  for n in 0 8 32; do
    if ! fits 40; then row "prefill, --stream-experts $n" "skipped: the time budget"; continue; fi
    # shellcheck disable=SC2086
    if timeout "$(left 100000)" "$CLOVER" bench -m "$file" --device "$device" $flags --stream-experts "$n" -p 512 -n 0 \
        -r 1 --mode ar -t "$threads" --json -q > "$OUT/stream-$n.json" 2> "$OUT/stream-$n.log"; then
      row "prefill, --stream-experts $n" "$(bench_row stream "$OUT/stream-$n.json")"
    else
      FAILURES=$((FAILURES + 1))
      row "prefill, --stream-experts $n" "bench failed or ran out of time: $(tail -2 "$OUT/stream-$n.log" | tr '\n' ' ')"
    fi
  done
}

finish() {
  { echo "# gpu-check $(date -u +%FT%TZ) ($(elapsed) s)"; echo; echo "| what | result |"; echo "|---|---|";
    printf '%s\n' "${ROWS[@]}"; if ((${#EXTRA[@]})); then printf '%s\n' "${EXTRA[@]}"; fi; } > "$OUT/gpu-check.md"
  # The device tool brings back at most 8 files from $OUT: the table, and every log in one archive.
  (cd "$OUT" && find . -type f ! -name gpu-check.md ! -name gpu-check-logs.tar.gz -printf '%P\0' | sort -z > /tmp/gpu-check-logs.list
   if [ -s /tmp/gpu-check-logs.list ]; then
     tar czf gpu-check-logs.tar.gz --null -T /tmp/gpu-check-logs.list && xargs -0 rm -f < /tmp/gpu-check-logs.list
   fi)
  echo; cat "$OUT/gpu-check.md"
}

case "${1:-}" in
  pack) pack ;;
  run)
    shift
    while (($#)); do
      case "$1" in
        --local) LOCAL=1 ;;
        --budget) BUDGET=$2; shift ;;
        --steps) STEPS=$2; shift ;;
        *) die "unknown option $1" ;;
      esac
      shift
    done
    run_check
    ;;
  *) die "usage: bench/gpu-check.sh pack | run [--local] [--budget SECONDS]" ;;
esac
