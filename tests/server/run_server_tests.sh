#!/usr/bin/env bash
# Starts `clover serve` on a free port with the default model, waits for /health, runs the node
# tests against it, and always stops the server.
#   run_server_tests.sh CLOVER_BINARY SOURCE_DIR [TEST_FILE...]
set -u
BIN=$(realpath "$1")
SRC=$(realpath "$2")
shift 2
if ! command -v node >/dev/null || [ ! -d "$SRC/node_modules/openai" ]; then
  echo "skipping: node or node_modules/openai is missing (run scripts/setup.sh)"
  exit 77
fi
MODEL=${CLOVER_TEST_MODEL:-$(dirname "$BIN")/models/default.gguf}
if [ ! -f "$MODEL" ]; then
  echo "error: no model at $MODEL (build the default_model target)" >&2
  exit 1
fi
LOG=$(mktemp)
"$BIN" serve -m "$MODEL" --host 127.0.0.1 --port 0 --parallel 4 --max-queue 64 --metrics --api-key test-key \
  --alias clover-test -c 4096 -t 2 --header-timeout 2 --body-timeout 3 2>"$LOG" &
PID=$!
cleanup() {
  kill "$PID" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$PID" 2>/dev/null
  wait "$PID" 2>/dev/null
  rm -f "$LOG"
}
trap cleanup EXIT

PORT=
for _ in $(seq 1 100); do
  PORT=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$LOG" | head -n1)
  [ -n "$PORT" ] && break
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$PORT" ]; then
  echo "error: the server did not start" >&2
  cat "$LOG" >&2
  exit 1
fi
READY=
for _ in $(seq 1 600); do
  if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")" = 200 ]; then READY=1; break; fi
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$READY" ]; then
  echo "error: the server did not become ready" >&2
  cat "$LOG" >&2
  exit 1
fi

if [ $# -eq 0 ]; then set -- "$SRC"/tests/server/*.test.mjs; fi
CLOVER_URL="http://127.0.0.1:$PORT" CLOVER_API_KEY=test-key CLOVER_MODEL_NAME=clover-test \
  CLOVER_BIN="$BIN" CLOVER_MODEL_PATH="$MODEL" NODE_PATH="$SRC/node_modules" \
  node --test --test-concurrency=1 "$@"
RC=$?
if [ $RC -ne 0 ]; then
  echo "---- server log (tail) ----" >&2
  tail -n 40 "$LOG" >&2
fi
exit $RC
