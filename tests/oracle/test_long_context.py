#!/usr/bin/python3
"""Long context: clover.cpp against llama.cpp v0.5.0 (node-llama-cpp 3.22.1) beyond position 32,000.

A small synthetic model (4 layers, one of them attention, head dim 32) reads a 33,000-token prompt
and the logits of positions 32,000 .. 32,999 are compared:
  - F32 weights, F32 KV, llama.cpp exact mode (flash attention off): the foundation bound 1e-4;
  - F16 KV against llama.cpp's F16 KV (flash attention off: its f16 K.Q and f16 V matmuls);
  - Q8_0 KV against llama.cpp's Q8_0 KV (flash attention on: llama.cpp refuses a quantised V cache
    without it).
The F16 and Q8_0 bounds are measured (docs/long-context.md): both sides round the same stored
values, and what remains is the order and precision of the sums (llama.cpp rounds the
probabilities to f16 before P.V with an F16 V, and its flash path accumulates differently).

Also, with no oracle: a prompt plus requested output larger than the context is refused by
`clover run` before any work, naming both numbers; a q8_0 cache on a head dim that is not a
multiple of 32 is refused at load.

Run: /usr/bin/python3 -m unittest tests/oracle/test_long_context.py   (CLOVER_BIN overrides the binary)
"""
import json
import os
import random
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLOVER = os.environ.get("CLOVER_BIN", os.path.join(ROOT, "build", "bin", "clover"))
ORACLE = os.path.join(ROOT, "tools", "oracle", "llama_oracle.mjs")
HAVE_ORACLE = shutil.which("node") is not None and os.path.isdir(os.path.join(ROOT, "node_modules", "node-llama-cpp"))
# The llama.cpp comparison costs about 5 CPU-minutes (two 33K-token prefills per cache type, llama.cpp's
# flash path being the slowest), too long for every CTest run: it runs when CLOVER_LONG_ORACLE=1
# (docs/long-context.md gives the command and the measured numbers).
RUN_ORACLE = HAVE_ORACLE and os.environ.get("CLOVER_LONG_ORACLE") == "1"

N_PROMPT = 33000
FROM = 32000
# 4 layers LLLF: one attention layer (4 query heads, 1 KV head, head dim 32), three GDN layers.
MODEL_ARGS = ["--layout", "qwen35moe", "--layers", "4", "--hidden", "64", "--heads", "4", "--kv-heads", "1",
              "--head-dim", "32", "--rope-dims", "16", "--gdn-k-heads", "1", "--gdn-v-heads", "2", "--gdn-head-dim", "16",
              "--experts", "4", "--experts-used", "2", "--expert-ff", "32", "--shared-ff", "32", "--ctx", "65536",
              "--seed", "11"]


def run(cmd, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return p


class Work:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="clover-long-")

    def path(self, name):
        return os.path.join(self.dir, name)


def stats(oracle, engine):
    d = np.abs(oracle.astype(np.float64) - engine.astype(np.float64))
    agree = float((oracle.argmax(1) == engine.argmax(1)).mean())
    return float(d.max()), float(np.percentile(d.max(1), 99)), agree


@unittest.skipUnless(RUN_ORACLE, "set CLOVER_LONG_ORACLE=1 (and have node-llama-cpp: scripts/setup.sh) to compare with llama.cpp")
class LongContextMatchesLlamaCpp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.w = Work()
        cls.model = cls.w.path("long.gguf")
        run([CLOVER, "synth", "-q", cls.model, *MODEL_ARGS])
        rng = random.Random(3)
        cls.ids = cls.w.path("ids.json")
        with open(cls.ids, "w") as f:
            json.dump([rng.randrange(0, 500) for _ in range(N_PROMPT)], f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.w.dir, ignore_errors=True)

    def oracle(self, kv, flash):
        out = self.w.path(f"oracle_{kv}.bin")
        run(["node", ORACLE, self.model, "logits", "--tokens-file", self.ids, "--from", str(FROM), "--out", out,
             "--flash-attn", flash, "--kv-type", kv, "--compact"])
        with open(out + ".json") as f:
            meta = json.load(f)
        self.assertEqual(meta["positions"][0], FROM)
        return np.fromfile(out, dtype="<f4").reshape(meta["shape"])

    def engine(self, kv):
        out = self.w.path(f"engine_{kv}.bin")
        run([CLOVER, "logits", "-m", self.model, "--tokens", self.ids, "--all", "--out", out, "-ctk", kv, "-ctv", kv])
        return np.fromfile(out, dtype="<f4").reshape(N_PROMPT, -1)[FROM:]

    def check(self, kv, flash, max_bound, p99_bound):
        o, e = self.oracle(kv, flash), self.engine(kv)
        worst, p99, agree = stats(o, e)
        print(f"KV {kv} (llama.cpp flash attention {flash}), positions {FROM}..{N_PROMPT - 1}: max |dlogit| {worst:.3g}, "
              f"99th percentile of per-position max {p99:.3g}, argmax agreement {agree:.4f}")
        self.assertLessEqual(worst, max_bound)
        self.assertLessEqual(p99, p99_bound)
        return worst

    def test_f32_kv_exact_mode(self):
        self.check("f32", "off", 1e-4, 1e-4)

    # Measured (docs/long-context.md, session 4): f32 0 (the exact attention path); f16 max 9.5e-6,
    # q8_0 max 2.3e-6 (session 3: 1.6e-5 and 4.4e-4 at one position). The bounds leave room for
    # other seeds and thread counts.
    def test_f16_kv(self):
        self.check("f16", "off", 2e-4, 1e-4)

    def test_q8_0_kv(self):
        self.check("q8_0", "on", 5e-3, 1e-4)


class ContextLimits(unittest.TestCase):
    """No oracle: the errors a long prompt meets."""

    @classmethod
    def setUpClass(cls):
        cls.w = Work()
        cls.model = cls.w.path("small.gguf")
        run([CLOVER, "synth", "-q", cls.model, "--head-dim", "36"])
        cls.ids = cls.w.path("ids.json")
        with open(cls.ids, "w") as f:
            json.dump(list(range(1, 51)), f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.w.dir, ignore_errors=True)

    def test_prompt_plus_output_beyond_context_is_refused_naming_both(self):
        p = run([CLOVER, "run", "-m", self.model, "--prompt-tokens", self.ids, "-n", "20", "-c", "64"], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("the prompt (50 tokens) plus max_tokens (20) exceeds the context size (64 tokens)", p.stderr)
        ok = run([CLOVER, "run", "-m", self.model, "--prompt-tokens", self.ids, "-n", "14", "-c", "64", "--ignore-eos"])
        self.assertIn("generation: 14 tokens", ok.stderr)

    def test_context_and_kv_memory_printed_at_load(self):
        ok = run([CLOVER, "run", "-m", self.model, "--prompt-tokens", self.ids, "-n", "1", "-c", "1000", "-ctk", "f32", "-ctv", "f16"])
        # tiny preset: 1 attention layer, 2 KV heads x 36; 1000 + 256 block-scratch positions.
        kib = 1256 * 2 * 36 * (4 + 2) / 1024
        self.assertIn(f"context 1000 tokens, KV cache f32/f16 {kib:.1f} KiB per session", ok.stderr)
        big = run([CLOVER, "run", "-m", self.model, "--prompt-tokens", self.ids, "-n", "1", "-c", "131072"])
        mib = (131072 + 256) * 2 * 36 * (2 + 2) / 2**20  # default f16/f16
        self.assertIn(f"context 131072 tokens, KV cache f16/f16 {mib:.1f} MiB per session", big.stderr)

    def test_q8_0_cache_needs_head_dim_multiple_of_32(self):
        p = run([CLOVER, "run", "-m", self.model, "--prompt-tokens", self.ids, "-n", "1", "-ctk", "q8_0"], check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("K cache type Q8_0 needs a head dimension that is a multiple of 32 (this model: 36)", p.stderr)
        p = run([CLOVER, "run", "-m", self.model, "--prompt-tokens", self.ids, "-n", "1", "-ctv", "q4_0"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("q4_0", p.stderr)


if __name__ == "__main__":
    unittest.main()
