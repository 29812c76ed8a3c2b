#!/usr/bin/python3
"""AR numerics of clover.cpp against llama.cpp v0.5.0 (node-llama-cpp 3.22.1), on synthetic models.

Every case writes a model with `clover synth`, runs llama.cpp in exact mode (flash attention off,
F32 KV cache) and `clover logits`, and compares all positions of a 220-token prompt. The base case
also compares 64 greedy tokens and the teacher-forced logits over prompt + generated tokens.

Run: /usr/bin/python3 -m unittest tests/oracle/test_ar_oracle.py   (CLOVER_BIN overrides the binary)
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
EXACT = ["--flash-attn", "off", "--kv-type", "f32"]


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


# The engine follows llama.cpp's summation orders on its AVX-512 path, and llama.cpp's prebuilt
# zen4/icelake-class variants are what the oracle loads on such CPUs. Elsewhere both sides sum in
# other orders, and reduced-precision weights get the looser bounds measured before the orders
# were matched.
SAME_ORDERS = {"avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512vbmi", "avx512_bf16"} <= cpu_flags()


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return p.stdout


def prompt_ids(n, vocab_limit, seed=1):
    rng = random.Random(seed)
    return [rng.randrange(0, vocab_limit) for _ in range(n)]


class Work:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="clover-oracle-")

    def path(self, name):
        return os.path.join(self.dir, name)

    def synth(self, name, *args):
        out = self.path(name + ".gguf")
        run([CLOVER, "synth", "-q", out, *args])
        return out

    def write_ids(self, name, ids):
        p = self.path(name + ".json")
        with open(p, "w") as f:
            json.dump(ids, f)
        return p

    def oracle_logits(self, model, ids_file):
        out = self.path(os.path.basename(model) + ".oracle.bin")
        run(["node", ORACLE, model, "logits", "--tokens-file", ids_file, "--all", "--out", out, *EXACT, "--compact"])
        with open(out + ".json") as f:
            meta = json.load(f)
        return np.fromfile(out, dtype="<f4").reshape(meta["shape"])

    def engine_logits(self, model, ids_file, *extra):
        out = self.path(os.path.basename(model) + ".engine.bin")
        run([CLOVER, "logits", "-m", model, "--tokens", ids_file, "--all", "--out", out, *extra])
        with open(model, "rb"):
            pass
        return np.fromfile(out, dtype="<f4")


def compare(test, oracle, engine, tol, what, argmax_min=1.0, within_tol_min=1.0, max_abs=None, relative=False,
            early=None):
    """Checks |engine - oracle| per element.

    tol: the bound that `within_tol_min` of the positions must meet (all of them by default);
    max_abs: a bound for every element (default: tol). relative: scale both bounds by the logits'
    standard deviation when it exceeds 1 (tied heads give logits of std ~sqrt(n_embd)).
    Argmax agreement is counted at every position, and must be perfect wherever the oracle's best
    two logits are further apart than twice the largest deviation (a closer pair is a tie at
    this precision, which rounding may break either way).
    early: (n, bound): the first n positions must all be within bound (where the summation orders
    differ, before a rounding flip of an activation carries the difference on).
    """
    engine = engine.reshape(oracle.shape)
    scale = max(1.0, float(oracle.std())) if relative else 1.0
    max_abs = (max_abs if max_abs is not None else tol) * scale
    tol = tol * scale
    d = np.abs(oracle.astype(np.float64) - engine.astype(np.float64))
    per_pos = d.max(1)
    agree = oracle.argmax(1) == engine.argmax(1)
    top2 = np.sort(oracle, axis=1)[:, -2:]
    decidable = (top2[:, 1] - top2[:, 0]) > 2 * d.max()
    worst = np.unravel_index(int(d.argmax()), d.shape)
    within = float((per_pos <= tol).mean())
    msg = (f"{what}: max |dlogit| {d.max():.3g} at position {worst[0]} (bound {max_abs:.3g}), "
           f"{within:.4f} of positions within {tol:.3g}, argmax agreement {agree.mean():.4f} "
           f"({int(agree[decidable].sum())}/{int(decidable.sum())} where decidable)")
    print(msg)
    test.assertLessEqual(d.max(), max_abs, msg)
    test.assertGreaterEqual(within, within_tol_min, msg)
    test.assertGreaterEqual(float(agree.mean()), argmax_min, msg)
    test.assertTrue(bool(agree[decidable].all()), msg)
    if early is not None:
        n, bound = early
        test.assertLessEqual(float(per_pos[:n].max()), bound, f"{msg}; the first {n} positions differ by "
                             f"{per_pos[:n].max():.3g} (bound {bound:.3g})")
    return d.max(), float(agree.mean())


@unittest.skipUnless(HAVE_ORACLE, "node or node_modules/node-llama-cpp missing: run scripts/setup.sh")
class ArMatchesLlamaCpp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.w = Work()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.w.dir, ignore_errors=True)

    def check_model(self, name, synth_args, tol, n_tokens=220, **bounds):
        model = self.w.synth(name, "--layout", "qwen35moe", *synth_args)
        ids = self.w.write_ids(name, prompt_ids(n_tokens, 500))
        return compare(self, self.w.oracle_logits(model, ids), self.w.engine_logits(model, ids), tol, name, **bounds)

    def test_f32_prompt_and_64_greedy_tokens(self):
        model = self.w.synth("base", "--layout", "qwen35moe")
        prompt = prompt_ids(220, 500)
        pfile = self.w.write_ids("base_prompt", prompt)
        gen = json.loads(run(["node", ORACLE, model, "generate", "--tokens-file", pfile, "--n", "64", *EXACT, "--compact"]))["generated"]
        mine = json.loads(run([CLOVER, "run", "-m", model, "--prompt-tokens", pfile, "-n", "64", "--ignore-eos", "--print-tokens",
                                      "-ctk", "f32", "-ctv", "f32"]).strip().splitlines()[-1])
        self.assertEqual(mine, gen, "greedy tokens differ from llama.cpp's")
        full = self.w.write_ids("base_full", prompt + gen)
        compare(self, self.w.oracle_logits(model, full), self.w.engine_logits(model, full), 1e-4, "f32 prompt+64 generated")

    @unittest.skipUnless(SAME_ORDERS, "greedy tokens may part at a near-tie where the summation orders differ")
    def test_greedy_64_tokens_for_every_weight_type(self):
        # Decode steps too: llama.cpp sums single-token float products in another order than its
        # prompt pass, but the greedy tokens still come out the same.
        prompt = self.w.write_ids("greedy_prompt", prompt_ids(220, 500))
        for t in ("f16", "bf16", "q8_0", "q4_0"):
            model = self.w.synth("greedy_" + t, "--layout", "qwen35moe", "--type", t)
            gen = json.loads(run(["node", ORACLE, model, "generate", "--tokens-file", prompt, "--n", "64", *EXACT, "--compact"]))["generated"]
            mine = json.loads(run([CLOVER, "run", "-m", model, "--prompt-tokens", prompt, "-n", "64", "--ignore-eos",
                                   "--print-tokens", "-ctk", "f32", "-ctv", "f32"]).strip().splitlines()[-1])
            self.assertEqual(mine, gen, f"{t}: greedy tokens differ from llama.cpp's")

    def test_f32_attention_first_fused_tied(self):
        # Tied head: logits have std ~11 (token_embd is N(0, 1)), so the bound scales with it.
        self.check_model("flll_fused_tied", ["--layer-pattern", "FLLL", "--fuse-qkv", "--fuse-gate-up", "--tie"], 1e-4,
                         relative=True)

    def test_f32_interval_key_only_8_layers(self):
        self.check_model("interval8", ["--layers", "8", "--no-recurrent-layers-key"], 1e-4)

    def test_f32_gqa8_equal_gdn_heads(self):
        self.check_model("gqa8", ["--layer-pattern", "LF", "--heads", "8", "--kv-heads", "1", "--head-dim", "32",
                                  "--gdn-k-heads", "4", "--gdn-v-heads", "4"], 1e-4)

    def test_f32_wider_moe_and_gdn_ratio_4(self):
        self.check_model("wide", ["--hidden", "256", "--experts", "16", "--experts-used", "4", "--gdn-k-heads", "2",
                                  "--gdn-v-heads", "8", "--expert-ff", "128"], 1e-4)

    # Reduced-precision weights: llama.cpp rounds each matmul input to the weight's activation type
    # (F16, BF16, Q8_0 blocks) and so does the engine, so a float difference of one ulp before a
    # product could round an input the other way and move later logits. The engine computes every
    # float part and every quantised product in llama.cpp's order (docs/oracle.md), and with the
    # exact F32 cache its logits are llama.cpp's bit for bit for all five types (measured 0 on
    # this prompt and on 4 other seeds). The bounds are the issue's.
    def test_f16(self):
        loose = {} if SAME_ORDERS else dict(within_tol_min=0.99, max_abs=0.02)
        self.check_model("f16", ["--type", "f16"], 5e-3, **loose)

    def test_bf16(self):
        # Elsewhere (measured on an AVX2-only AMD EPYC: max 0.023, 9.5 % of positions within 5e-3)
        # the bound is 0.05 at every position.
        loose = {} if SAME_ORDERS else dict(max_abs=0.5, argmax_min=0.98)
        self.check_model("bf16", ["--type", "bf16"], 5e-3 if SAME_ORDERS else 0.05, **loose)

    # Elsewhere (AVX2 EPYC, Zen 3, session 22: q8_0 max 0.971 from position ~30 on, 90.5 % of
    # positions within 0.05, argmax 99 %; q4_0 max 0.024) the first positions are held to 1e-3.
    def test_q8_0(self):
        loose = {} if SAME_ORDERS else dict(within_tol_min=0.85, max_abs=1.5, argmax_min=0.95, early=(8, 1e-3))
        self.check_model("q8_0", ["--type", "q8_0"], 0.05, **loose)

    def test_q4_0(self):
        loose = {} if SAME_ORDERS else dict(within_tol_min=0.85, max_abs=1.5, argmax_min=0.95, early=(8, 1e-3))
        self.check_model("q4_0", ["--type", "q4_0"], 0.05, **loose)


# Shapes whose every matrix row is a whole number of 256-value K-quant super-blocks (the tiny preset's
# 128 / 64 / 96 would make llama-quantize fall back to Q5_0 / Q5_1 / Q8_0), and 16 experts so
# that the 8-expert rules of the presets stay out of the way.
KQUANT_SHAPE = ["--hidden", "256", "--gdn-head-dim", "64", "--expert-ff", "256", "--shared-ff", "256",
                "--experts", "16", "--experts-used", "4"]
# The bounds for quantised files where the summation orders differ from llama.cpp's (no AVX-512):
# the first positions agree to ~1e-6 (measured on an AVX2 EPYC, Zen 3: <= 3.3e-5 over the first 16
# of the Q4_0 file); from position ~16-30 on, an activation's rounding flips now and then and the
# recurrent state carries it, so later positions are compared loosely (measured there: max 1.1 on
# the tiny Q3_K_M file, argmax agreement 94.5-100 %, all decidable positions agreeing).
LOOSE = dict(within_tol_min=0.4, max_abs=1.5, argmax_min=0.9, early=(8, 1e-3))
PRESETS = ("Q4_K_M", "Q4_K_S", "Q5_K_M", "Q5_K_S", "Q6_K", "Q3_K_M", "Q3_K_S", "Q2_K", "Q8_0", "Q4_0", "Q4_1", "Q5_0",
           "Q5_1", "IQ4_NL", "IQ4_XS")


@unittest.skipUnless(HAVE_ORACLE, "node or node_modules/node-llama-cpp missing: run scripts/setup.sh")
class QuantizedFilesMatchLlamaCpp(unittest.TestCase):
    """`clover quantize` writes the file from an F32 one; llama.cpp and clover.cpp both run it."""

    @classmethod
    def setUpClass(cls):
        cls.w = Work()
        cls.f32 = cls.w.synth("kq_f32", "--layout", "qwen35moe", *KQUANT_SHAPE)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.w.dir, ignore_errors=True)

    def quantized(self, preset):
        out = self.w.path(f"kq_{preset}.gguf")
        if not os.path.exists(out):
            run([CLOVER, "quantize", "-q", self.f32, out, preset])
        return out

    def test_logits_of_every_preset(self):
        ids = self.w.write_ids("kq_prompt", prompt_ids(220, 500))
        # Without AVX-512 the float parts (norms, attention, GDN) sum in other orders than
        # llama.cpp's haswell build, by ~1e-6 at the first positions (the K-quant products
        # themselves give ggml's bits on every path: tests/kernels/ggml_kquant_oracle_test.cpp);
        # the recurrent state and the Q8_K rounding of activations carry that on. Measured on an
        # AVX2 EPYC: max 0.48, >= 44 % of positions within 0.05, argmax agreement >= 94.5 %.
        loose = {} if SAME_ORDERS else LOOSE
        for preset in PRESETS:
            with self.subTest(preset=preset):
                model = self.quantized(preset)
                compare(self, self.w.oracle_logits(model, ids), self.w.engine_logits(model, ids), 0.05,
                        f"quantize {preset}", **loose)

    @unittest.skipUnless(SAME_ORDERS, "greedy tokens may part at a near-tie where the summation orders differ")
    def test_greedy_64_tokens_q4_k_m_and_q6_k(self):
        prompt = self.w.write_ids("kq_greedy_prompt", prompt_ids(220, 500))
        # (IQ4_XS and Q3_K_M have their own test below: llama.cpp's decode steps sum them in
        # another order than its prompt passes.)
        for preset in ("Q4_K_M", "Q6_K", "Q3_K_S", "Q2_K", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL"):
            model = self.quantized(preset)
            gen = json.loads(run(["node", ORACLE, model, "generate", "--tokens-file", prompt, "--n", "64", *EXACT, "--compact"]))["generated"]
            mine = self.greedy(model, prompt)
            self.assertEqual(mine, gen, f"{preset}: greedy tokens differ from llama.cpp's")

    def greedy(self, model, prompt):
        return json.loads(run([CLOVER, "run", "-m", model, "--prompt-tokens", prompt, "-n", "64", "--ignore-eos",
                               "--print-tokens", "-ctk", "f32", "-ctv", "f32"]).strip().splitlines()[-1])

    @unittest.skipUnless(SAME_ORDERS, "the engine's logits equal llama.cpp's only where the summation orders are the same")
    def test_greedy_64_tokens_iq4_xs_and_q3_k_m_are_llama_cpps_argmax(self):
        # llama.cpp sums some products in an order that depends on the number of tokens in the
        # pass: IQ4_XS in its IQ panel gemm for 8 or more tokens (a prompt pass), vec_dot's lanes
        # for fewer (a decode step); Q4_K matrices of 8k rows in its repacked gemm for whole groups
        # of 4 tokens, its gemv (256-value groups) for a single token. The engine keeps one order
        # per matrix at every token count (batch invariance, docs/oracle.md), so its decode steps
        # give the bits of llama.cpp's prompt passes, not of its decode steps. On these files
        # llama.cpp's `generate` leaves its own prompt-pass argmax at a near-tie (IQ4_XS: step 26,
        # token 309 where its prompt pass prefers 162 by 0.0076; Q3_K_M, whose attn_qkv,
        # attn_output and shared ffn_down are dense Q4_K: step 51, by 0.0051); its generated
        # tokens are therefore not the reference. Instead: the engine's 64 greedy tokens must be
        # the argmax of llama.cpp's logits over prompt + those tokens in one pass, and those
        # logits must equal the engine's (Q3_K_M: bit for bit; IQ4_XS within 0.05, see
        # test_logits_of_every_preset).
        ids = prompt_ids(220, 500)
        for preset, tol in (("IQ4_XS", 0.05), ("Q3_K_M", 0.0)):
            with self.subTest(preset=preset):
                model = self.quantized(preset)
                mine = self.greedy(model, self.w.write_ids(f"{preset}_greedy_prompt", ids))
                forced = self.w.write_ids(f"{preset}_forced", ids + mine)
                oracle = self.w.oracle_logits(model, forced)
                self.assertEqual([int(t) for t in oracle[len(ids) - 1:-1].argmax(1)], mine,
                                 f"{preset}: greedy tokens are not llama.cpp's argmax over the same tokens")
                compare(self, oracle, self.w.engine_logits(model, forced), tol, f"{preset} prompt + greedy tokens")

    def test_rows_that_are_not_super_blocks_fall_back_like_llama_quantize(self):
        # The tiny shape (rows of 128 / 64 / 96 values): Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0
        # tensor by tensor, so these files mix legacy and K-quant types the way llama-quantize's
        # do. Same bounds as the K-quant files above.
        f32 = self.w.synth("tiny_f32", "--layout", "qwen35moe")
        ids = self.w.write_ids("tiny_kq_prompt", prompt_ids(220, 500))
        loose = {} if SAME_ORDERS else LOOSE
        # Q3_K_M (IQ4_NL, Q5_0, Q5_K, Q8_0 here) has IQ4_NL ssm_alpha / ssm_beta of 4 rows, which
        # llama.cpp's prompt pass sums in tinyBLAS's order (one set of lanes), not vec_dot's pairs
        # of blocks: it parted from position 61 on before the engine followed that.
        for preset, fallback in (("Q4_K_M", "Q5_0"), ("Q5_K_S", "Q5_1"), ("IQ4_NL", "IQ4_NL"), ("IQ4_XS", "IQ4_NL"),
                                 ("Q3_K_S", "IQ4_NL"), ("Q2_K", "IQ4_NL"), ("Q3_K_M", "Q5_0")):
            with self.subTest(preset=preset):
                out = self.w.path(f"tiny_{preset}.gguf")
                run([CLOVER, "quantize", "-q", f32, out, preset])
                table = run([CLOVER, "inspect", out])
                self.assertIn(fallback, table, f"{preset} on 128-wide rows has no {fallback} tensor")
                self.assertIn(preset, table, "inspect does not name the preset")
                compare(self, self.w.oracle_logits(out, ids), self.w.engine_logits(out, ids), 0.05,
                        f"tiny {preset}", **loose)

    def test_low_bit_presets_mix_types_like_llama_quantize(self):
        # Q2_K: ffn_down / attn_output in Q3_K, attn_v in Q3_K or Q4_K; Q3_K_M: attn_v, ffn_down,
        # attn_output and attn_qkv in Q4_K / Q5_K; Q3_K_S: Q3_K with a Q6_K head.
        for preset, types in (("Q2_K", ("Q2_K", "Q3_K", "Q6_K")), ("Q3_K_S", ("Q3_K", "Q6_K")),
                              ("Q3_K_M", ("Q3_K", "Q4_K", "Q5_K", "Q6_K"))):
            with self.subTest(preset=preset):
                table = run([CLOVER, "inspect", self.quantized(preset)])
                self.assertIn(preset, table, "inspect does not name the preset")
                for t in types:
                    self.assertIn(t, table, f"{preset} has no {t} tensor")

    def test_synth_preset_equals_quantize_of_f32(self):
        # `clover synth --type PRESET` gives the same tensor types (and, from the same weights,
        # the same bytes) as quantising the F32 synth file.
        direct = self.w.synth("kq_direct", "--layout", "qwen35moe", *KQUANT_SHAPE, "--type", "Q4_K_M")
        with open(direct, "rb") as a, open(self.quantized("Q4_K_M"), "rb") as b:
            self.assertEqual(a.read(), b.read(), "synth --type Q4_K_M differs from quantize of the F32 file")

    def test_errors(self):
        bad = subprocess.run([CLOVER, "quantize", self.f32, self.w.path("x.gguf"), "Q3_K_L"], capture_output=True, text=True)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("Q4_K_M", bad.stderr)  # lists the presets it supports
        q8 = self.quantized("Q8_0")
        again = subprocess.run([CLOVER, "quantize", q8, self.w.path("y.gguf"), "Q4_K_M"], capture_output=True, text=True)
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("--allow-requantize", again.stderr)
        run([CLOVER, "quantize", "-q", "--allow-requantize", q8, self.w.path("y.gguf"), "Q4_K_M"])
        self.assertFalse(os.path.exists(self.w.path("x.gguf")), "a failed quantize left an output file")


class LayoutsAndStateCarryOver(unittest.TestCase):
    """No oracle needed: the three layouts of one seed, and chunked evaluation."""

    @classmethod
    def setUpClass(cls):
        cls.w = Work()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.w.dir, ignore_errors=True)

    def test_same_seed_same_logits_in_every_layout(self):
        ids = self.w.write_ids("layout_ids", prompt_ids(150, 500, seed=3))
        outs = {}
        for layout in ("official", "llama-clover", "qwen35moe"):
            m = self.w.synth("layout_" + layout, "--layout", layout, "--seed", "7", "--type", "q8_0")
            outs[layout] = self.w.engine_logits(m, ids)
        self.assertTrue(np.array_equal(outs["official"], outs["qwen35moe"]), "official vs qwen35moe logits differ")
        self.assertTrue(np.array_equal(outs["llama-clover"], outs["qwen35moe"]), "llama-clover vs qwen35moe logits differ")

    def test_chunked_evaluation_is_bitwise_identical(self):
        m = self.w.synth("chunks", "--layout", "official", "--type", "q4_0")
        ids = self.w.write_ids("chunk_ids", prompt_ids(100, 500, seed=5))
        whole = self.w.engine_logits(m, ids)
        for chunk in ("1", "7", "64"):
            part = self.w.engine_logits(m, ids, "--chunk", chunk)
            self.assertTrue(np.array_equal(whole, part), f"chunks of {chunk} tokens change the logits")
        small_batch = self.w.engine_logits(m, ids, "--batch", "5")
        self.assertTrue(np.array_equal(whole, small_batch), "batch size 5 changes the logits")


if __name__ == "__main__":
    unittest.main()
