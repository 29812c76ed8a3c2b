#!/usr/bin/python3
"""Where and why a quantised MoE model's logits leave llama.cpp's (a report, not a test).

Writes a larger Q4_0 model (8 layers, 16 experts), runs llama.cpp v0.5.0 in exact mode and the
engine with --trace-routing, and prints: max |dlogit|, argmax agreement, the first position whose
logits deviate by more than --tol, and the smallest routing margin (p of the k-th chosen expert
minus p of the best expert not chosen, over all layers) at each position around it. A margin far
below the size of Q8_0 activation rounding (~1e-3 relative) at the first diverging position means
the divergence starts at a routing near-tie that rounding can flip, not at an engine bug.

usage: /usr/bin/python3 tests/oracle/quantized_divergence.py [--type q4_0] [--tokens 200] [--tol 0.05]
"""
import argparse
import json
import os
import random
import subprocess
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLOVER = os.environ.get("CLOVER_BIN", os.path.join(ROOT, "build", "bin", "clover"))
ORACLE = os.path.join(ROOT, "tools", "oracle", "llama_oracle.mjs")


def sh(cmd):
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--type", default="q4_0")
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--tol", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="clover-qdiv-")
    model = os.path.join(d, "m.gguf")
    sh([CLOVER, "synth", "-q", model, "--layout", "qwen35moe", "--type", args.type, "--seed", str(args.seed),
        "--layers", "8", "--hidden", "512", "--experts", "16", "--experts-used", "4", "--expert-ff", "128",
        "--shared-ff", "128", "--heads", "8", "--kv-heads", "2", "--head-dim", "64", "--rope-dims", "16",
        "--gdn-k-heads", "4", "--gdn-v-heads", "8", "--gdn-head-dim", "64"])
    rng = random.Random(args.seed)
    ids = [rng.randrange(0, 500) for _ in range(args.tokens)]
    idf = os.path.join(d, "ids.json")
    json.dump(ids, open(idf, "w"))
    ob, eb, tr = (os.path.join(d, x) for x in ("oracle.bin", "engine.bin", "routing.txt"))
    sh(["node", ORACLE, model, "logits", "--tokens-file", idf, "--all", "--out", ob, "--flash-attn", "off", "--kv-type", "f32", "--compact"])
    sh([CLOVER, "logits", "-m", model, "--tokens", idf, "--all", "--out", eb, "--trace-routing", tr])
    n_vocab = json.load(open(ob + ".json"))["n_vocab"]
    o = np.fromfile(ob, "<f4").reshape(-1, n_vocab)
    e = np.fromfile(eb, "<f4").reshape(-1, n_vocab)
    dev = np.abs(o - e).max(1)
    agree = (o.argmax(1) == e.argmax(1)).mean()
    margin = np.full(len(ids), np.inf)
    for line in open(tr):
        layer, pos, _, m = line.split()
        margin[int(pos)] = min(margin[int(pos)], float(m))
    print(f"model: 8 layers, hidden 512, 16 experts top-4, {args.type}; {len(ids)} tokens")
    print(f"max |dlogit| {dev.max():.4g}, argmax agreement {agree:.4f}")
    over = np.nonzero(dev > args.tol)[0]
    if len(over) == 0:
        print(f"no position deviates by more than {args.tol}")
        return
    first = int(over[0])
    exact = int(np.argmax(dev > 1e-5)) if (dev > 1e-5).any() else len(ids)
    print(f"first position over {args.tol}: {first}; identical to float rounding (<= 1e-5) through position {exact - 1}, "
          f"then a jump to {dev[exact]:.3g} at position {exact}")
    print("position  max|dlogit|  smallest routing margin (all layers)")
    for p in range(0, min(len(ids), first + 3)):
        print(f"{p:8d}  {dev[p]:11.3g}  {margin[p]:.3g}{'   <- first divergence' if p == first else ''}")
    print(f"median routing margin over all positions: {np.median(margin):.3g}")


if __name__ == "__main__":
    main()
