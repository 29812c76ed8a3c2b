#!/usr/bin/python3
"""Quality of each `clover quantize` preset on the trained clover-tiny (a report, not a test).

The shipped model is a Q8_0 file, so each preset is written from it with --allow-requantize. Per
preset: file size; mean KL(Q8_0 || preset) of the next-token distributions over held-out
conversations (prompt + answer, teacher-forced with `clover logits --all`); and the evaluation
scores of tools/train/evaluate.py (--n per family, AR / diffusion / guess-then-verify in the
engine) with diffusion's tokens per denoising pass. clover-tiny's rows (128 / 64 / 96 values) are not
whole 256-value super-blocks, so the K-quant presets fall back tensor by tensor the way
llama-quantize does (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> IQ4_NL): the table says
what a user of such a file gets, not how the K-quant blocks themselves rank.

usage: CLOVER_BIN=build/bin/clover /usr/bin/python3 -m tools.train.quant_quality [--n 10] [--presets Q4_K_M,Q4_0]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from tools.train import dataset
from tools.train.train import clover_bin, tokenized_examples

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRESETS = "Q8_0,Q6_K,Q5_K_M,Q5_K_S,Q5_1,Q5_0,Q4_K_M,Q4_K_S,Q4_1,IQ4_NL,IQ4_XS,Q4_0,Q3_K_M,Q3_K_S,Q2_K"


def sh(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return p.stdout


def all_logits(model, ids, tmp):
    path = os.path.join(tmp, "ids.json")
    with open(path, "w") as f:
        json.dump(ids, f)
    out = os.path.join(tmp, "logits.bin")
    sh([clover_bin(), "logits", "-m", model, "--tokens", path, "--all", "--out", out])
    return np.fromfile(out, dtype="<f4").reshape(len(ids), -1).astype(np.float64)


def log_softmax(x):
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "clover-tiny.gguf"))
    ap.add_argument("--presets", default=PRESETS)
    ap.add_argument("--n", type=int, default=10, help="evaluation examples per family")
    ap.add_argument("--kl-examples", type=int, default=30, help="held-out conversations for the KL")
    ap.add_argument("--out")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ex = dataset.generate(a.kl_examples, 11, "heldout")
        ex = tokenized_examples(a.model, ex, os.path.join(tmp, "tok"))
        seqs = [e["prompt_ids"] + e["answer_ids"] for e in ex]
        ref = [log_softmax(all_logits(a.model, s, tmp)) for s in seqs]
        for preset in a.presets.split(","):
            path = os.path.join(tmp, f"{preset}.gguf")
            sh([clover_bin(), "quantize", "-q", "--allow-requantize", a.model, path, preset])
            kl = []
            for s, lp in zip(seqs, ref):
                lq = log_softmax(all_logits(path, s, tmp))
                kl.append((np.exp(lp) * (lp - lq)).sum(axis=1))
            out = os.path.join(tmp, f"{preset}.json")
            sh([sys.executable, "-m", "tools.train.evaluate", path, "--n", str(a.n), "--out", out])
            with open(out) as f:
                r = json.load(f)
            fam = r["families"]
            score = {m: float(np.mean([fam[k][m] for k in fam])) for m in ("ar", "diffusion", "spec")}
            row = {"preset": preset, "mib": os.path.getsize(path) / 2**20, "mean_kl": float(np.concatenate(kl).mean()),
                   "score": score, "families": fam, "tokens_per_denoising_pass": r["diffusion_tokens_per_denoising_pass"],
                   "spec_equals_ar": r["spec_equals_ar"]}
            rows.append(row)
            print(f"{preset}: {row['mib']:.2f} MiB, mean KL {row['mean_kl']:.3g}, scores AR {score['ar']:.3f} "
                  f"diffusion {score['diffusion']:.3f} spec {score['spec']:.3f}, "
                  f"{row['tokens_per_denoising_pass']:.1f} tokens/denoising pass", file=sys.stderr, flush=True)
    print(f"| preset | MiB | mean KL vs Q8_0 | score AR | diffusion | spec | tokens / denoising pass |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        s = r["score"]
        print(f"| {r['preset']} | {r['mib']:.2f} | {r['mean_kl']:.2e} | {s['ar']:.3f} | {s['diffusion']:.3f} | "
              f"{s['spec']:.3f} | {r['tokens_per_denoising_pass']:.1f} |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
