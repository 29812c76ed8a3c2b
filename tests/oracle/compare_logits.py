#!/usr/bin/python3
"""Compare an engine's logits with a llama.cpp oracle dump.

usage: /usr/bin/python3 tests/oracle/compare_logits.py ORACLE.bin ENGINE.bin [--tol X] [--argmax-min F]

ORACLE.bin: little-endian float32 [position][n_vocab] written by tools/oracle/llama_oracle.mjs, with
ORACLE.bin.json beside it ({tokens, positions, n_vocab, shape}).
ENGINE.bin: raw little-endian float32 [position][n_vocab], no header (`clover logits` output). It
either has the oracle's rows (same count, same positions) or one row per input token, in which case
the oracle's positions are picked out of it.

Passes when every |delta| <= tol and the fraction of positions whose argmax agrees >= argmax-min.
Exit status: 0 pass, 1 fail, 2 bad input. Defaults fit F32 models in exact mode (oracle run with
--flash-attn off --kv-type f32); quantised models need e.g. --tol 0.25 --argmax-min 0.95
(docs/oracle.md).
"""
import argparse
import json
import os
import sys

import numpy as np


def die(msg: str) -> None:
    print(f"compare_logits: {msg}", file=sys.stderr)
    sys.exit(2)


def load_oracle(path: str):
    meta_path = path + ".json"
    if not os.path.exists(meta_path):
        die(f"{meta_path} not found (the oracle writes it next to the dump)")
    with open(meta_path) as f:
        meta = json.load(f)
    if meta.get("dtype", "float32") != "float32":
        die(f"{path}: dtype {meta.get('dtype')} is not float32 (rerun the oracle with --format f32)")
    n_vocab = int(meta["n_vocab"])
    positions = [int(p) for p in meta["positions"]]
    data = np.fromfile(path, dtype="<f4")
    if data.size != len(positions) * n_vocab:
        die(f"{path}: {data.size} floats, expected {len(positions)} positions x {n_vocab}")
    return data.reshape(len(positions), n_vocab), positions, meta


def load_engine(path: str, n_vocab: int, positions: list, n_tokens: int):
    data = np.fromfile(path, dtype="<f4")
    if data.size == 0 or data.size % n_vocab != 0:
        die(f"{path}: {data.size} floats is not a whole number of rows of n_vocab {n_vocab}")
    rows = data.reshape(-1, n_vocab)
    if rows.shape[0] == len(positions):
        return rows
    if rows.shape[0] == n_tokens:
        return rows[positions]
    die(f"{path}: {rows.shape[0]} rows; expected {len(positions)} (oracle positions) or {n_tokens} (every token)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("oracle")
    ap.add_argument("engine")
    ap.add_argument("--tol", type=float, default=1e-4, help="max allowed |delta logit| (default 1e-4)")
    ap.add_argument("--argmax-min", type=float, default=1.0,
                    help="min fraction of positions whose argmax agrees (default 1.0)")
    args = ap.parse_args()

    ref, positions, meta = load_oracle(args.oracle)
    n_vocab = ref.shape[1]
    mine = load_engine(args.engine, n_vocab, positions, len(meta.get("tokens", [])))

    finite = np.isfinite(mine).all(axis=1)
    ref64 = ref.astype(np.float64)
    delta = np.abs(mine.astype(np.float64) - ref64)
    delta[~finite] = np.inf
    per_pos = delta.max(axis=1)
    agree = mine.argmax(axis=1) == ref.argmax(axis=1)

    max_d = float(per_pos.max())
    worst = int(per_pos.argmax())
    worst_tok = int(delta[worst].argmax())
    over = np.nonzero(per_pos > args.tol)[0]
    agree_frac = float(agree.mean())

    print(f"positions compared: {len(positions)} (n_vocab {n_vocab})")
    print(f"max |delta|:  {max_d:.6g} at position {positions[worst]}, token {worst_tok} "
          f"(oracle {ref[worst, worst_tok]:.6g}, engine {mine[worst, worst_tok]:.6g})")
    print(f"mean |delta|: {float(np.mean(delta[finite])) if finite.any() else float('inf'):.6g}")
    print(f"argmax agreement: {int(agree.sum())}/{len(agree)} ({agree_frac:.4f})")
    if not finite.all():
        print(f"non-finite engine logits at positions {[positions[i] for i in np.nonzero(~finite)[0][:10]]}")
    if over.size:
        first = int(over[0])
        print(f"first position over tol {args.tol:g}: {positions[first]} (max |delta| there {per_pos[first]:.6g}); "
              f"{over.size} position(s) over")
    else:
        print(f"no position over tol {args.tol:g}")

    ok = finite.all() and over.size == 0 and agree_frac >= args.argmax_min
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
