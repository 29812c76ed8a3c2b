"""Export a clover-tiny checkpoint as a GGUF in the official layout (CLOVER-SPEC 3.1): torchref's
writer, the trained vocabulary, the Qwen3.5 chat template and the diffusion keys
clover_moe.diffusion.block_size / threshold / mask_token_id.

    /usr/bin/python3 -m tools.train.export --run /work/train-run [--type q8_0|f32] [--out models/clover-tiny.gguf]
"""
import argparse
import os

from tools.torchref import gguf
from tools.torchref.layout import OFFICIAL, write_gguf
from tools.train.train import load_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True)
    ap.add_argument("--ckpt", default="ckpt.pt")
    ap.add_argument("--type", default="q8_0", choices=["f32", "f16", "q8_0", "q4_0"])
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "clover-tiny.gguf"))
    a = ap.parse_args()
    m, cfg, conf, step = load_model(a.run, a.ckpt)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    write_gguf(a.out, cfg, m.w, OFFICIAL, gguf.type_from_name(a.type))
    print(f"{a.out}: step {step}, {a.type}, {os.path.getsize(a.out) / 1e6:.2f} MB, vocab {cfg.n_vocab}, "
          f"mask id {cfg.mask_token_id}, block {cfg.block_size}, tau {cfg.threshold}")


if __name__ == "__main__":
    main()
