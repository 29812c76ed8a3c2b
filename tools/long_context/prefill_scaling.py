#!/usr/bin/python3
"""Prefill tokens/s against prompt length for clover.cpp and llama.cpp on the same GGUF file.

  /usr/bin/python3 tools/long_context/prefill_scaling.py --out results.json [--lengths 1024,8192,32768,131072]
  /usr/bin/python3 tools/long_context/prefill_scaling.py --plot results.json --png docs/long-context-prefill.png

Each length runs `clover run --prompt-tokens P -n 1` (its "prompt: N tokens in S s" line; peak RSS
from /usr/bin/time) and `node tools/oracle/llama_oracle.mjs MODEL generate --tokens-file P --n 1`
(its prompt_ms), both with the same thread count, each engine with its default KV cache (f16) and
llama.cpp with its default flash-attention setting. Engines alternate per length. Short prompts are
repeated (--reps) and the median kept. The model is the long-context test model (tests/oracle/
test_long_context.py): 4 layers, one attention layer (4 query heads, 1 KV head, head dim 32),
qwen35moe layout, so both engines load it.
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLOVER = os.environ.get("CLOVER_BIN", os.path.join(ROOT, "build", "bin", "clover"))
ORACLE = os.path.join(ROOT, "tools", "oracle", "llama_oracle.mjs")
MODEL_ARGS = ["--layout", "qwen35moe", "--layers", "4", "--hidden", "64", "--heads", "4", "--kv-heads", "1",
              "--head-dim", "32", "--rope-dims", "16", "--gdn-k-heads", "1", "--gdn-v-heads", "2", "--gdn-head-dim", "16",
              "--experts", "4", "--experts-used", "2", "--expert-ff", "32", "--shared-ff", "32", "--ctx", "262144",
              "--seed", "11"]


def clover_prefill(model, prompt, n, threads):
    p = subprocess.run(["/usr/bin/time", "-f", "peak_rss_kb %M", CLOVER, "run", "-m", model, "--prompt-tokens", prompt, "-n", "1",
                        "-c", str(n + 1), "-t", str(threads), "--ignore-eos"], capture_output=True, text=True, check=True)
    m = re.search(r"prompt: (\d+) tokens in ([\d.]+) s", p.stderr)
    rss = int(re.search(r"peak_rss_kb (\d+)", p.stderr).group(1))
    ctx = re.search(r"context .*", p.stderr).group(0)
    return float(m.group(2)), rss * 1024, ctx


def llama_prefill(model, prompt, threads):
    p = subprocess.run(["node", ORACLE, model, "generate", "--tokens-file", prompt, "--n", "1", "--threads", str(threads),
                        "--compact"], capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])["prompt_ms"] / 1000.0


def measure(args):
    work = tempfile.mkdtemp(prefix="clover-prefill-")
    model = os.path.join(work, "model.gguf")
    subprocess.run([CLOVER, "synth", "-q", model, *MODEL_ARGS], check=True)
    rng = random.Random(1)
    results = {"model_args": MODEL_ARGS, "threads": args.threads, "rows": []}
    for n in [int(x) for x in args.lengths.split(",")]:
        prompt = os.path.join(work, f"p{n}.json")
        with open(prompt, "w") as f:
            json.dump([rng.randrange(0, 500) for _ in range(n)], f)
        reps = args.reps if n <= 8192 else 1
        c, l, rss, ctx = [], [], 0, ""
        for _ in range(reps):
            sec, rss, ctx = clover_prefill(model, prompt, n, args.threads)
            c.append(sec)
            if not args.skip_llama or n not in [int(x) for x in args.skip_llama.split(",")]:
                l.append(llama_prefill(model, prompt, args.threads))
        row = {"tokens": n, "clover_s": statistics.median(c), "clover_tok_s": n / statistics.median(c),
               "clover_peak_rss": rss, "clover_context": ctx,
               "llama_s": statistics.median(l) if l else None, "llama_tok_s": n / statistics.median(l) if l else None}
        print(json.dumps(row), flush=True)
        results["rows"].append(row)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


def plot(args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(args.plot) as f:
        res = json.load(f)
    rows = res["rows"]
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.plot([r["tokens"] for r in rows], [r["clover_tok_s"] for r in rows], "o-", label="clover.cpp (f16 KV)")
    lr = [r for r in rows if r["llama_tok_s"]]
    ax.plot([r["tokens"] for r in lr], [r["llama_tok_s"] for r in lr], "s--", label="llama.cpp v0.5.0 (f16 KV, default flash attn)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("prefill tokens/s")
    ax.set_title(f"Prefill speed vs prompt length ({res['threads']} threads, synthetic 4-layer model)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print("| prompt tokens | clover.cpp s | clover.cpp tok/s | llama.cpp s | llama.cpp tok/s | clover peak RSS |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ls = f"{r['llama_s']:.2f}" if r["llama_s"] else "—"
        lt = f"{r['llama_tok_s']:.0f}" if r["llama_tok_s"] else "—"
        print(f"| {r['tokens']:,} | {r['clover_s']:.2f} | {r['clover_tok_s']:.0f} | {ls} | {lt} | {r['clover_peak_rss'] / 2**20:.0f} MiB |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="prefill_scaling.json")
    ap.add_argument("--lengths", default="1024,8192,32768,131072")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip-llama", default="", help="lengths at which llama.cpp is not run")
    ap.add_argument("--plot")
    ap.add_argument("--png", default="long-context-prefill.png")
    a = ap.parse_args()
    plot(a) if a.plot else measure(a)
