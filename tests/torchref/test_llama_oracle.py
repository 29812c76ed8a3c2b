"""AR logits of the reference vs llama.cpp (tools/oracle/llama_oracle.mjs, node-llama-cpp 3.22.1 =
llama.cpp v0.5.0) on small random qwen35moe files written with tools/torchref/gguf.py.

Exact mode (--flash-attn off --kv-type f32). F32 weights: max |dlogit| <= 1e-4 (measured 3e-6 - 7e-6).
Other weight types need the activation rounding emulated (act_quant) and a tolerance: an activation
(or a Q8_0 block scale) that sits within float32 noise of a Q8_0/fp16/bf16 rounding boundary rounds
differently in llama.cpp (float32) and here (float64), and the KV/recurrent state carries the
difference to every later position. Measured on these models (40 tokens): Q8_0 3.5e-7; Q4_0 2e-7 on
some sequences, 2.5e-2 - 4.6e-2 once a boundary case occurs (the same seeds without act_quant:
0.6 - 0.9); F16 2.3e-3 - 4.2e-3; BF16 7.9e-4 - 1.1e-2. Tolerances: Q8_0/Q4_0 0.15, F16 1e-2,
BF16 5e-2, argmax agreement >= 95 %.
Skipped with a message when node or node_modules/node-llama-cpp is missing.

    /usr/bin/python3 -m unittest discover tests/torchref
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)
from tools.torchref import gguf, layout, model, synth  # noqa: E402

torch.set_num_threads(1)
ORACLE = os.path.join(ROOT, "tools", "oracle", "llama_oracle.mjs")
MISSING = [what for what, ok in (
    ("node", shutil.which("node") is not None),
    ("node_modules/node-llama-cpp (run `npm ci` in the repository root)",
     os.path.isdir(os.path.join(ROOT, "node_modules", "node-llama-cpp"))),
    ("tools/oracle/llama_oracle.mjs", os.path.isfile(ORACLE))) if not ok]


def oracle_logits(model_path, tokens, workdir):
    ids, out = os.path.join(workdir, "ids.json"), os.path.join(workdir, "oracle.bin")
    with open(ids, "w") as f:
        json.dump(tokens, f)
    r = subprocess.run(["node", ORACLE, model_path, "logits", "--tokens-file", ids, "--all", "--out", out,
                        "--flash-attn", "off", "--kv-type", "f32", "--threads", "1", "--compact"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"oracle failed ({r.returncode}): {r.stderr[-2000:]}")
    with open(out + ".json") as f:
        meta = json.load(f)
    return np.fromfile(out, np.float32).reshape(meta["shape"])


@unittest.skipIf(MISSING, "llama.cpp oracle not available: missing " + ", ".join(MISSING))
class VsLlamaCpp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.tokens = [int(t) for t in np.random.default_rng(11).integers(0, 316, 40)]

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def compare(self, wtype, tol, act_quant, pattern="LLLF", seed=0, **cfg_kw):
        path = os.path.join(self.dir.name, f"m-{gguf.TYPE_NAMES[wtype]}-{pattern}.gguf")
        synth.write_random_model(path, layout.QWEN35MOE, wtype, seed, pattern, **cfg_kw)
        ref = oracle_logits(path, self.tokens, self.dir.name)
        m = model.CloverRef.from_gguf(path, act_quant=act_quant)
        with torch.no_grad():
            mine = m.forward(self.tokens)[0].numpy()
        err = float(np.abs(mine - ref).max())
        agree = float((mine.argmax(1) == ref.argmax(1)).mean())
        tol *= max(1.0, float(ref.std()))                             # tied N(0,1) embeddings: logits ~10x
        print(f"\n  vs llama.cpp {gguf.TYPE_NAMES[wtype]} {pattern} act_quant={act_quant}: "
              f"max|dlogit| {err:.3g} (tol {tol:.3g}, logit std {ref.std():.3g}), argmax agreement {agree:.3f}",
              file=sys.stderr)
        self.assertLessEqual(err, tol)
        self.assertGreaterEqual(agree, 0.95)

    def test_f32(self):
        self.compare(gguf.F32, 1e-4, act_quant=False)

    def test_f32_other_shapes(self):
        # attention first, two attention layers, wider model, 4 q heads per kv head, H_v = 3 H_k, top-3
        # routing, tied output; IMROPE sections [1,1,1,1] leave the last rotary pair at position 0
        self.compare(gguf.F32, 1e-4, act_quant=False, pattern="FLLF", seed=3, tie=True, n_embd=128, n_head=8,
                     n_head_kv=2, head_dim=16, n_rot=8, rope_sections=[1, 1, 1, 1], gdn_k_heads=2, gdn_v_heads=6,
                     gdn_k_dim=16, gdn_v_dim=16, n_expert=6, n_expert_used=3)

    def test_f32_fused_tensors(self):
        # attention attn_qkv and ffn_gate_up_exps in their fused forms
        self.compare(gguf.F32, 1e-4, act_quant=False, pattern="LFLF", seed=4, fuse=True)

    def test_official_q8_0_converted_for_llama_cpp(self):
        # an official-layout file (A_log, ssm_rev_*) patched to qwen35moe; the reference reads the official one
        off, conv = (os.path.join(self.dir.name, n) for n in ("official-q8_0.gguf", "official-q8_0-as-qwen.gguf"))
        synth.write_random_model(off, layout.OFFICIAL, gguf.Q8_0, seed=6)
        layout.convert_layout(off, conv, layout.QWEN35MOE)
        ref = oracle_logits(conv, self.tokens, self.dir.name)
        with torch.no_grad():
            mine = model.CloverRef.from_gguf(off, act_quant=True).forward(self.tokens)[0].numpy()
        err = float(np.abs(mine - ref).max())
        print(f"\n  vs llama.cpp official Q8_0 -> qwen35moe: max|dlogit| {err:.3g}", file=sys.stderr)
        self.assertLessEqual(err, 0.15)
        self.assertGreaterEqual(float((mine.argmax(1) == ref.argmax(1)).mean()), 0.95)

    def test_q8_0_act_quant(self):
        self.compare(gguf.Q8_0, 0.15, act_quant=True)

    def test_q4_0_act_quant(self):
        self.compare(gguf.Q4_0, 0.15, act_quant=True)

    def test_f16_act_quant(self):
        self.compare(gguf.F16, 1e-2, act_quant=True)

    def test_bf16_act_quant(self):
        self.compare(gguf.BF16, 5e-2, act_quant=True)


if __name__ == "__main__":
    unittest.main()
