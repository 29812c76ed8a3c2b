#!/usr/bin/env python3
"""Differential check of clover's Jinja interpreter against Python jinja2 on a directory of
templates (e.g. a fuzz corpus from tests/chat/fuzz): renders each with the same context in both
and reports outputs that differ and templates that fail in only one of them.

  cmake --build build --target chat_jinja_render
  python3 tools/chat_jinja_diff.py build/tests/chat/chat_jinja_render CORPUS_DIR [CONTEXT.json]

Known, accepted differences: integers beyond 64 bits, the repr of bound methods and generators.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jinja_oracle  # noqa: E402

DEFAULT_CONTEXT = {
    "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi <b>"},
                 {"role": "assistant", "content": None, "reasoning_content": "r",
                  "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1, "b": [True, None, 2.5]}}}]},
                 {"role": "tool", "content": [{"type": "text", "text": "x"}]}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": True, "bos_token": "", "eos_token": "<|im_end|>", "n": 3, "s": "héllo"}


class Timeout(Exception):
    pass


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    tool, corpus = sys.argv[1], sys.argv[2]
    ctx = json.load(open(sys.argv[3])) if len(sys.argv) > 3 else DEFAULT_CONTEXT
    files = sorted(os.path.join(corpus, f) for f in os.listdir(corpus))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(ctx, f)
        ctx_path = f.name
    lines = subprocess.run([tool, ctx_path] + files, capture_output=True, check=True).stdout.decode("utf-8", "replace")
    os.unlink(ctx_path)

    def on_alarm(*_):
        raise Timeout()

    signal.signal(signal.SIGALRM, on_alarm)
    counts = {"same": 0, "differ": 0, "status": 0, "skipped": 0}
    for line in lines.split("\n"):
        if not line:
            continue
        r = json.loads(line)
        try:
            src = open(r["file"], "rb").read().decode("utf-8")
        except (UnicodeDecodeError, OSError):  # not text, or removed by a running fuzzer
            counts["skipped"] += 1
            continue
        signal.alarm(2)
        try:
            status, text = jinja_oracle.render(src, ctx)
        except (Timeout, RecursionError):
            counts["skipped"] += 1
            continue
        finally:
            signal.alarm(0)
        py_ok, cc_ok = status == "ok", r["status"] == "ok"
        if py_ok and cc_ok and text != r["output"]:
            counts["differ"] += 1
            print(f"DIFFER {r['file']}\n  template: {src[:200]!r}\n  jinja2:   {text[:200]!r}\n  clover:   {r['output'][:200]!r}")
        elif py_ok != cc_ok:
            counts["status"] += 1
            print(f"STATUS {r['file']}\n  template: {src[:200]!r}\n  jinja2:   {status} {text[:120]!r}\n"
                  f"  clover:   {r['status']} {r.get('message', '')[:120]!r}")
        else:
            counts["same"] += 1
    print(counts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
