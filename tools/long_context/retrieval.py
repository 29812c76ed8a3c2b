#!/usr/bin/python3
"""How long a prompt the shipped tiny model still finds its hidden code in.

The retrieval task of the training mix (tools/train/dataset.py: filler sentences with "The secret
code is K7-4821." inserted at a random place, then "What is the secret code?") with more and more
filler, greedy AR decoding in the engine (`clover run`, f32 KV), counting exact answers.

  /usr/bin/python3 tools/long_context/retrieval.py models/clover-tiny.gguf [--fillers 8,16,32,64,128,256] [--n 8]
"""
import argparse
import json
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from tools.train import dataset  # noqa: E402

CLOVER = os.environ.get("CLOVER_BIN", os.path.join(ROOT, "build", "bin", "clover"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--fillers", default="8,16,32,64,128,256")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rows = []
    for nf in [int(x) for x in a.fillers.split(",")]:
        rng = random.Random(f"retrieval|{a.seed}|{nf}")
        hits, lengths = 0, []
        for _ in range(a.n):
            ex = dataset.retrieval_example(rng, True, n_filler=(nf, nf + 1))
            p = subprocess.run([CLOVER, "run", "-m", a.model, "-p", ex["prompt"], "--special", "-n", "32", "-ctk", "f32",
                                "-ctv", "f32"], capture_output=True, text=True, check=True)
            out = p.stdout[len(ex["prompt"]):]
            n_prompt = int(p.stderr.split("prompt: ")[1].split(" tokens")[0])
            lengths.append(n_prompt)
            answer = out.split("</think>")[-1].replace("<|im_end|>", "").strip()
            hits += answer == ex["meta"]["code"]
        row = {"filler_sentences": nf, "prompt_tokens_mean": sum(lengths) / len(lengths), "prompt_tokens_max": max(lengths),
               "exact": hits, "n": a.n}
        print(json.dumps(row), flush=True)
        rows.append(row)
    print("| filler sentences | prompt tokens (mean / max) | code retrieved |")
    print("|---:|---:|---:|")
    for r in rows:
        print(f"| {r['filler_sentences']} | {r['prompt_tokens_mean']:.0f} / {r['prompt_tokens_max']} | {r['exact']}/{r['n']} |")


if __name__ == "__main__":
    main()
