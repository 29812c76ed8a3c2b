"""Command line for the PyTorch reference (see README.md).

  python3 -m tools.torchref.cli logits MODEL.gguf --tokens IDS.json [--all] --out OUT.bin
  python3 -m tools.torchref.cli denoise MODEL.gguf --prefix IDS.json --block IDS.json --out OUT.bin [--no-reverse]
  python3 -m tools.torchref.cli commit-state MODEL.gguf --prefix IDS.json [--block IDS.json] --out STATE.gguf|STATE.npz
  python3 -m tools.torchref.cli generate MODEL.gguf --tokens IDS.json --n N [--mode ar|diffusion|verify]
        [--eos ID,ID] [--block-size B] [--tau T] [--mask-id ID] [--no-reverse] --out OUT.json   (greedy)
  python3 -m tools.torchref.cli convert MODEL.gguf --layout official|llama_clover|qwen35moe --out OUT.gguf
common: [--act-quant] [--dtype f64|f32] [--threads N]
denoise / commit-state: [--state STATE.gguf|.npz] starts from a dumped state (e.g. the engine's) instead
of an empty one; --prefix is then encoded after it.

Logit dumps: little-endian float32 [position][n_vocab], with OUT.bin.json beside them
({tokens, positions, n_vocab, shape, dtype, layout}), the same format as tools/oracle/llama_oracle.mjs.
IDS.json: a JSON list of token ids, or an object with a "tokens" list.
"""
import argparse
import json
import sys

import torch

from . import decode
from .layout import LAYOUTS, convert_layout
from .model import CloverRef
from .state_io import load_state, save_state


def read_ids(path):
    if path is None:
        return []
    with open(path) as f:
        v = json.load(f)
    ids = v["tokens"] if isinstance(v, dict) else v
    return [int(t) for t in ids]


def write_logits(path, logits, tokens, positions, log):
    a = logits.detach().to(torch.float32).numpy()
    a.astype("<f4").tofile(path)
    with open(path + ".json", "w") as f:
        json.dump({"tokens": tokens, "positions": positions, "n_vocab": int(a.shape[1]), "shape": list(a.shape),
                   "dtype": "float32", "layout": "row-major [position][token]"}, f)
    top = a[-1].argsort()[::-1][:5]
    print(json.dumps({"out": path, "shape": list(a.shape), "last_argmax": int(top[0]),
                      "last_top": [[int(t), round(float(a[-1, t]), 6)] for t in top]}), file=log)


def start_state(m, a):
    """--state (or empty), then --prefix encoded causally."""
    state = load_state(a.state, m.cfg, m.dtype) if a.state else m.empty_state()
    prefix = read_ids(a.prefix)
    return m.forward(prefix, state)[1] if prefix else state


def generate(m, a, log):
    prompt = read_ids(a.tokens)
    eos = tuple(int(t) for t in a.eos.split(",") if t)
    if a.mode == "ar":
        out = decode.ar_generate(m, prompt, a.n, eos)
    elif a.mode == "diffusion":
        out = decode.diffusion_generate(m, prompt, a.n, eos, a.block_size, a.tau, a.mask_id, not a.no_reverse)
    else:
        out = decode.verify_generate(m, prompt, a.n, eos, a.block_size, a.mask_id, not a.no_reverse)
    with open(a.out, "w") as f:
        json.dump({"mode": a.mode, "prompt": prompt, "generated": out}, f)
    print(json.dumps({"out": a.out, "mode": a.mode, "generated": out}), file=log)


def main(argv=None, log=sys.stdout):
    ap = argparse.ArgumentParser(prog="python3 -m tools.torchref.cli", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["logits", "denoise", "commit-state", "generate", "convert"])
    ap.add_argument("model")
    ap.add_argument("--tokens", help="logits: the token ids")
    ap.add_argument("--all", action="store_true", help="logits: every position (default: the last)")
    ap.add_argument("--prefix", help="denoise / commit-state: committed tokens, encoded causally first")
    ap.add_argument("--block", help="denoise: [p, t1..t(B-1)] with mask ids; commit-state: block to commit")
    ap.add_argument("--no-reverse", action="store_true", help="denoise without the reverse GDN path")
    ap.add_argument("--state", help="denoise / commit-state: start from this state dump (state_io.py)")
    ap.add_argument("--n", type=int, default=32, help="generate: tokens to generate")
    ap.add_argument("--mode", default="ar", choices=["ar", "diffusion", "verify"], help="generate: decoder")
    ap.add_argument("--eos", default="", help="generate: end token ids, comma-separated")
    ap.add_argument("--block-size", type=int, help="generate: B (default: the file's)")
    ap.add_argument("--tau", type=float, help="generate: threshold (default: the file's)")
    ap.add_argument("--mask-id", type=int, help="generate: mask token id (default: the file's)")
    ap.add_argument("--layout", choices=LAYOUTS, help="convert: target layout (other tensors' bytes kept)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--act-quant", action="store_true", help="emulate ggml-cpu activation rounding")
    ap.add_argument("--dtype", default="f64", choices=["f64", "f32"])
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)

    if a.cmd == "convert":
        convert_layout(a.model, a.out, a.layout)
        print(json.dumps({"out": a.out, "layout": a.layout}), file=log)
        return 0
    torch.set_num_threads(a.threads)
    dtype = torch.float64 if a.dtype == "f64" else torch.float32
    m = CloverRef.from_gguf(a.model, dtype=dtype, act_quant=a.act_quant)
    with torch.no_grad():
        if a.cmd == "logits":
            tokens = read_ids(a.tokens)
            logits, _ = m.forward(tokens)
            positions = list(range(len(tokens))) if a.all else [len(tokens) - 1]
            write_logits(a.out, logits[positions], tokens, positions, log)
        elif a.cmd == "denoise":
            block = read_ids(a.block)
            logits = m.denoise(block, start_state(m, a), use_reverse=not a.no_reverse)
            write_logits(a.out, logits, block, list(range(len(block))), log)
        elif a.cmd == "generate":
            generate(m, a, log)
        else:
            block = read_ids(a.block)
            state = start_state(m, a)
            if block:
                state = m.commit(block, state)[1]
            save_state(a.out, m.cfg, state)
            print(json.dumps({"out": a.out, "n_past": state.n_past}), file=log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
