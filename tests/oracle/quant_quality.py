#!/usr/bin/python3
"""Quality of each `clover quantize` preset on a synthetic model (a report, not a test).

Writes an F32 synthetic qwen35moe model (the K-quant oracle shape: hidden 256, 16 experts, or
--tiny for the 128-wide preset whose rows fall back to Q5_0 / Q5_1 / Q8_0), quantises it to every
preset, runs `clover logits` on a random 220-token prompt and prints per preset: file size, RMSE of
the logits against F32, mean KL(F32 || preset) of the next-token distributions, and how often the
argmax agrees with F32's. (Random weights: the numbers compare presets with each other; they say
nothing about a trained model's perplexity.)

usage: /usr/bin/python3 tests/oracle/quant_quality.py [--tiny] [--presets Q4_K_M,Q4_1]
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLOVER = os.environ.get("CLOVER_BIN", os.path.join(ROOT, "build", "bin", "clover"))
KQUANT_SHAPE = ["--hidden", "256", "--gdn-head-dim", "64", "--expert-ff", "256", "--shared-ff", "256",
                "--experts", "16", "--experts-used", "4"]
PRESETS = "Q8_0,Q6_K,Q5_K_M,Q5_K_S,Q5_1,Q5_0,Q4_K_M,Q4_K_S,Q4_1,IQ4_NL,IQ4_XS,Q4_0,Q3_K_M,Q3_K_S,Q2_K"


def sh(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def logits(d, model, ids):
    out = os.path.join(d, os.path.basename(model) + ".bin")
    sh([CLOVER, "logits", "-m", model, "--tokens", ids, "--all", "--out", out])
    return np.fromfile(out, dtype="<f4")


def log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--presets", default=PRESETS)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="clover-qq-")
    try:
        f32 = os.path.join(d, "f32.gguf")
        sh([CLOVER, "synth", "-q", f32, "--layout", "qwen35moe", *([] if args.tiny else KQUANT_SHAPE)])
        ids = os.path.join(d, "ids.json")
        rng = random.Random(1)
        with open(ids, "w") as f:
            json.dump([rng.randrange(0, 500) for _ in range(220)], f)
        ref = logits(d, f32, ids)
        n_pos = 220
        ref = ref.reshape(n_pos, -1).astype(np.float64)
        lp_ref = log_softmax(ref)
        print(f"{'preset':8} {'MiB':>6} {'rmse':>8} {'mean KL':>9} {'argmax':>7}")
        print(f"{'F32':8} {os.path.getsize(f32) / 2**20:6.1f} {0:8.4f} {0:9.2e} {100:6.1f}%")
        for p in args.presets.split(","):
            m = os.path.join(d, p + ".gguf")
            sh([CLOVER, "quantize", "-q", f32, m, p])
            q = logits(d, m, ids).reshape(n_pos, -1).astype(np.float64)
            kl = (np.exp(lp_ref) * (lp_ref - log_softmax(q))).sum(axis=-1).mean()
            rmse = np.sqrt(((q - ref) ** 2).mean())
            agree = (q.argmax(axis=-1) == ref.argmax(axis=-1)).mean() * 100
            print(f"{p:8} {os.path.getsize(m) / 2**20:6.1f} {rmse:8.4f} {kl:9.2e} {agree:6.1f}%")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
