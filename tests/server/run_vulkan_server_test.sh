#!/usr/bin/env bash
# `clover serve --device vulkan:N` against `clover serve --device cpu`, both on the trained
# clover-tiny: starts the two servers on free ports, runs vulkan.e2e.mjs (the same greedy
# requests must give the same answers on both, in every decoding mode) and the pass-event tests of
# the diffusion and spec modes (pass_events.test.mjs) against the Vulkan server, always stops them.
# First, `clover run --mode diffusion|spec` gives the same answer on the device as on the CPU.
#   run_vulkan_server_test.sh CLOVER_BINARY SOURCE_DIR
# Skips (exit 77) without node, the openai client, or a Vulkan device.
set -u
BIN=$(realpath "$1")
SRC=$(realpath "$2")
if ! command -v node >/dev/null || [ ! -d "$SRC/node_modules/openai" ]; then
  echo "skipping: node or node_modules/openai is missing (run scripts/setup.sh)"
  exit 77
fi
if ! "$BIN" devices 2>/dev/null | grep -q '^vulkan:'; then
  echo "skipping: no Vulkan device (install mesa-vulkan-drivers for lavapipe)"
  exit 77
fi
DEV="vulkan:${CLOVER_VK_TEST_DEVICE:-0}"
MODEL="$SRC/models/clover-tiny.gguf"
LOGS=()
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  rm -f "${LOGS[@]}"
}
trap cleanup EXIT

# start DEVICE -> sets PORT
start() {
  local log
  log=$(mktemp)
  LOGS+=("$log")
  CLOVER_VK_VALIDATE=1 "$BIN" serve -m "$MODEL" --device "$1" --host 127.0.0.1 --port 0 --parallel 4 --metrics \
    --alias clover-test -c 2048 -t 2 2>"$log" &
  PIDS+=($!)
  PORT=
  for _ in $(seq 1 600); do
    PORT=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$log" | head -n1)
    if [ -n "$PORT" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")" = 200 ]; then return 0; fi
    kill -0 "${PIDS[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  echo "error: the $1 server did not become ready" >&2
  cat "$log" >&2
  exit 1
}
# The CLI: block diffusion and guess-then-verify on the device give the CPU's answer.
for MODE in diffusion spec; do
  ARGS=(run -m "$MODEL" --mode "$MODE" --chat -p "What is the capital of Australia? One word." -n 24 -t 2)
  GPU_OUT=$(CLOVER_VK_VALIDATE=1 "$BIN" "${ARGS[@]}" --device "$DEV" 2>/dev/null)
  CPU_OUT=$("$BIN" "${ARGS[@]}" --device cpu 2>/dev/null)
  if [ -z "$GPU_OUT" ] || [ "$GPU_OUT" != "$CPU_OUT" ]; then
    echo "error: clover run --mode $MODE --device $DEV answered differently from the CPU:" >&2
    echo "gpu: $GPU_OUT" >&2
    echo "cpu: $CPU_OUT" >&2
    exit 1
  fi
done

start "$DEV"
VK_PORT=$PORT
VK_LOG=${LOGS[-1]}
start cpu
CPU_PORT=$PORT

CLOVER_URL="http://127.0.0.1:$VK_PORT" CLOVER_CPU_URL="http://127.0.0.1:$CPU_PORT" CLOVER_MODEL_NAME=clover-test \
  NODE_PATH="$SRC/node_modules" node --test --test-concurrency=1 "$SRC/tests/server/vulkan.e2e.mjs"
RC=$?
# The server's own diffusion/spec end-to-end tests (pass events through the openai client, the
# replayed blocks) against the Vulkan server.
CLOVER_URL="http://127.0.0.1:$VK_PORT" CLOVER_MODEL_NAME=clover-test \
  NODE_PATH="$SRC/node_modules" node --test --test-concurrency=1 "$SRC/tests/server/pass_events.test.mjs" || RC=1
# The validation layer's messages go to the server's stderr: any is a failure.
if grep -q "Validation Error\|VUID-" "$VK_LOG"; then
  echo "error: the validation layer reported problems:" >&2
  grep -m 20 "Validation Error\|VUID-" "$VK_LOG" >&2
  RC=1
fi
if [ $RC -ne 0 ]; then
  echo "---- vulkan server log (tail) ----" >&2
  tail -n 40 "$VK_LOG" >&2
fi
exit $RC
