"""Identities the reference must satisfy (no llama.cpp needed).

    /usr/bin/python3 -m unittest discover tests/torchref
"""
import io
import json
import math
import os
import sys
import tempfile
import unittest
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from tools.torchref import cli, decode, gguf, layout, model, state_io, synth  # noqa: E402

torch.set_num_threads(1)
EXACT = 1e-10          # float64, same math in a different order


def make(pattern="LLLF", reverse=True, seed=0, **kw):
    cfg = synth.tiny_config(pattern, **kw)
    w = synth.random_weights(cfg, seed, reverse=reverse)
    return model.CloverRef(cfg, {n: torch.from_numpy(a).double() for n, a in w.items()})


def assert_states_equal(tc, a, b, tol=0.0):
    tc.assertEqual(a.n_past, b.n_past)
    for name in ("k", "v", "conv", "ssm"):
        da, db = getattr(a, name), getattr(b, name)
        tc.assertEqual(sorted(da), sorted(db), name)
        for il in da:
            tc.assertEqual(da[il].shape, db[il].shape, f"{name}[{il}]")
            tc.assertLessEqual((da[il] - db[il]).abs().max().item() if da[il].numel() else 0.0, tol, f"{name}[{il}]")


def max_diff(a, b):
    return (a - b).abs().max().item()


class ArAndCommit(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = make()
        cls.tokens = [250, 251, 17, 300, 5, 260, 261, 99, 100, 101, 7, 8, 9]

    def test_chunked_forward_equals_one_call(self):
        full, st_full = self.m.forward(self.tokens)
        parts, st = [], None
        for a, b in ((0, 1), (1, 6), (6, 7), (7, 13)):
            lg, st = self.m.forward(self.tokens[a:b], st)
            parts.append(lg)
        self.assertLess(max_diff(torch.cat(parts), full), EXACT)
        assert_states_equal(self, st, st_full, EXACT)

    def test_state_shapes(self):
        cfg = self.m.cfg
        _, st = self.m.forward(self.tokens[:5])
        self.assertEqual(st.n_past, 5)
        self.assertEqual(tuple(st.k[3].shape), (5, cfg.n_head_kv * cfg.head_dim))
        self.assertEqual(tuple(st.conv[0].shape), (cfg.conv_kernel - 1, cfg.gdn_channels))
        self.assertEqual(tuple(st.ssm[0].shape), (cfg.gdn_v_heads, cfg.gdn_k_dim, cfg.gdn_v_dim))
        # the conv state is the last K-1 pre-conv inputs: recompute them
        h = model.rms_norm(self.m.w["token_embd.weight"][self.tokens[2:5]], self.m.w["blk.0.attn_norm.weight"], cfg.eps)
        self.assertLess(max_diff(st.conv[0], self.m.linear(h, "blk.0.attn_qkv.weight")), EXACT)

    def test_commit_equals_ar(self):
        prefix, block = self.tokens[:5], self.tokens[5:13]
        full, st_full = self.m.forward(prefix + block)
        _, st = self.m.forward(prefix)
        lg, st2 = self.m.commit(block, st)
        self.assertLess(max_diff(lg, full[5:]), EXACT)
        assert_states_equal(self, st2, st_full, EXACT)


class Denoise(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = make()
        cls.mask = cls.m.cfg.mask_token_id
        _, cls.st = cls.m.forward([250, 251, 17, 300, 5])
        cls.block = [260] + [cls.mask] * 3 + [40, cls.mask, 41, cls.mask]

    def test_denoise_leaves_state_unchanged(self):
        before = self.st.clone()
        self.m.denoise(self.block, self.st)
        self.m.denoise(self.block, self.st, use_reverse=False)
        assert_states_equal(self, self.st, before)

    def test_causal_denoise_without_reverse_is_the_commit_pass(self):
        # with the two diffusion-only features off, a denoising pass is an AR pass over the block
        lg = self.m.denoise(self.block, self.st, use_reverse=False, bidirectional=False)
        self.assertLess(max_diff(lg, self.m.commit(self.block, self.st)[0]), EXACT)

    def test_block_of_one_is_an_ar_step(self):
        # one position: bidirectional = causal, and the reverse path has no later position to read
        lg = self.m.denoise([260], self.st)
        self.assertLess(max_diff(lg, self.m.forward([260], self.st)[0]), EXACT)

    def test_last_position_single_gdn_layer(self):
        # the last block position gets nothing from the reverse path; with one GDN layer its output is AR's
        m = make("L")
        _, st = m.forward([250, 251, 17])
        lg, ar = m.denoise(self.block, st), m.forward(self.block, st)[0]
        self.assertLess(max_diff(lg[-1], ar[-1]), EXACT)
        self.assertGreater(max_diff(lg[:-1], ar[:-1]), 1e-3)             # earlier positions see later ones

    def test_last_position_gdn_then_attention_without_reverse(self):
        # GDN causal, then attention whose last row sees the whole block anyway
        m = make("LF", reverse=False)
        _, st = m.forward([250, 251, 17])
        lg, ar = m.denoise(self.block, st, use_reverse=False), m.forward(self.block, st)[0]
        self.assertLess(max_diff(lg[-1], ar[-1]), EXACT)
        self.assertGreater(max_diff(lg[:-1], ar[:-1]), 1e-3)

    def test_reverse_path_matches_explicit_formula(self):
        rng = np.random.default_rng(3)
        T, H, d = 3, 2, 4
        t = lambda *s: torch.from_numpy(rng.standard_normal(s))
        q, k, v = t(T, H, d), t(T, H, d), t(T, H, d)
        g, beta = -torch.rand(T, H, dtype=torch.float64), torch.rand(T, H, dtype=torch.float64)
        o = model.reverse_in_block(q, k, v, g, beta)
        s = 1 / math.sqrt(d)
        for h in range(H):
            R2 = torch.outer(k[2, h], v[2, h] * beta[2, h])                       # after adding t = 2
            R1 = math.exp(g[1, h]) * R2
            R1 = R1 + torch.outer(k[1, h], (v[1, h] - R1.T @ k[1, h]) * beta[1, h])
            self.assertLess(o[2, h].abs().max().item(), 1e-300)                 # nothing after the last
            self.assertLess(max_diff(o[1, h], s * R2.T @ q[1, h]), 1e-12)
            self.assertLess(max_diff(o[0, h], s * R1.T @ q[0, h]), 1e-12)

    def test_no_reverse_tensors_refuses_unless_asked(self):
        m = make(reverse=False)
        with self.assertRaises(ValueError):
            m.denoise(self.block, m.empty_state())
        self.assertEqual(tuple(m.denoise(self.block, m.empty_state(), use_reverse=False).shape),
                         (len(self.block), m.cfg.n_vocab))

    def test_gradients_flow_through_both_paths(self):
        params = model.CloverParams(self.m.w)
        m = model.CloverRef(self.m.cfg, params.as_dict())
        logits = m.denoise(self.block, self.st)
        torch.log_softmax(logits, -1)[:, 3].sum().backward()
        grads = {n.replace("__", "."): p.grad for n, p in params.params.items()}
        for n in ("blk.0.ssm_rev_beta.weight", "blk.1.ssm_rev_a", "blk.0.ssm_a", "blk.3.attn_q.weight",
                  "blk.2.ffn_gate_exps.weight", "token_embd.weight"):
            self.assertIsNotNone(grads[n], n)
            self.assertTrue(torch.isfinite(grads[n]).all() and grads[n].abs().sum() > 0, n)


class Files(unittest.TestCase):
    """The three layouts, the state dump and the command line."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.cfg = synth.tiny_config("LLLF")
        cls.w = synth.random_weights(cls.cfg, 5, reverse=True)
        cls.paths = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")                                # dropping ssm_rev_* warns
            for lay in layout.LAYOUTS:
                cls.paths[lay] = os.path.join(cls.dir.name, f"{lay}.gguf")
                layout.write_gguf(cls.paths[lay], cls.cfg, cls.w, lay)
        cls.mem = model.CloverRef(cls.cfg, {n: torch.from_numpy(a).double() for n, a in cls.w.items()})
        cls.tokens = [250, 251, 17, 300, 5, 260]
        cls.block = [261, 319, 319, 40, 319]

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def test_layouts_detected_and_equivalent(self):
        ref, _ = self.mem.forward(self.tokens)
        for lay, p in self.paths.items():
            m = model.CloverRef.from_gguf(p)
            self.assertEqual(m.layout, lay)
            self.assertEqual(m.has_reverse, lay == layout.OFFICIAL)
            self.assertLess(max_diff(m.forward(self.tokens)[0], ref), 1e-5, lay)   # A_log -> -exp round trip
        m = model.CloverRef.from_gguf(self.paths[layout.OFFICIAL])
        self.assertEqual((m.cfg.mask_token_id, m.cfg.block_size), (self.cfg.mask_token_id, self.cfg.block_size))
        st = self.mem.forward(self.tokens)[1]
        self.assertLess(max_diff(m.denoise(self.block, st), self.mem.denoise(self.block, st)), 1e-5)

    def test_convert_layout_keeps_bytes(self):
        src = self.paths[layout.OFFICIAL]
        ref = model.CloverRef.from_gguf(src).forward(self.tokens)[0]
        f0 = gguf.GGUFFile(src)
        for lay in (layout.LLAMA_CLOVER, layout.QWEN35MOE):
            p = self.path(f"conv-{lay}.gguf")
            layout.convert_layout(src, p, lay)
            f = gguf.GGUFFile(p)
            self.assertEqual(layout.detect_layout(f), lay)
            self.assertFalse(any(".ssm_rev_" in n for n in f.tensors))
            self.assertEqual(bytes(f.raw("blk.1.ssm_out.weight")), bytes(f0.raw("blk.1.ssm_out.weight")))
            a_log = f0.tensor("blk.1.ssm_a").astype(np.float64)
            np.testing.assert_array_equal(f.tensor("blk.1.ssm_a"), (-np.exp(a_log)).astype(np.float32))
            self.assertEqual(max_diff(model.CloverRef.from_gguf(p).forward(self.tokens)[0], ref), 0.0)
        back = self.path("back.gguf")
        layout.convert_layout(self.paths[layout.OFFICIAL], back, layout.OFFICIAL)
        self.assertEqual(layout.detect_layout(gguf.GGUFFile(back)), layout.OFFICIAL)
        with self.assertRaises(ValueError):
            layout.convert_layout(self.paths[layout.QWEN35MOE], back, layout.OFFICIAL)

    def test_fused_tensors_load_split(self):
        p = self.path("fused.gguf")
        layout.write_gguf(p, self.cfg, synth.fuse_tensors(self.cfg, self.w), layout.OFFICIAL)
        m = model.CloverRef.from_gguf(p)
        self.assertNotIn("blk.3.attn_qkv.weight", m.w)
        self.assertLess(max_diff(m.forward(self.tokens)[0], self.mem.forward(self.tokens)[0]), 1e-5)

    def test_a_log_sign_warnings(self):
        w = dict(self.w)
        w["blk.0.ssm_a"] = np.abs(w["blk.0.ssm_a"])                       # not -exp(A_log)
        p = self.path("bad.gguf")
        layout.write_gguf(p, self.cfg, {n: a for n, a in w.items() if ".ssm_rev_" not in n}, layout.QWEN35MOE)
        with self.assertWarnsRegex(UserWarning, "blk.0.ssm_a"):
            model.CloverRef.from_gguf(p)

    def test_state_dump_round_trip(self):
        m = self.mem
        _, st = m.forward(self.tokens)
        ref, _ = m.forward(self.block, st)
        for ext in ("gguf", "npz"):
            p = self.path(f"state.{ext}")
            state_io.save_state(p, self.cfg, st)
            st2 = state_io.load_state(p, self.cfg)
            assert_states_equal(self, st2, st, 1e-6)                          # float32 on disk
            self.assertLess(max_diff(m.forward(self.block, st2)[0], ref), 1e-4, ext)

    def test_cli(self):
        ids, blk = self.path("ids.json"), self.path("blk.json")
        with open(ids, "w") as f:
            json.dump(self.tokens, f)
        with open(blk, "w") as f:
            json.dump({"tokens": self.block}, f)
        mp = self.paths[layout.OFFICIAL]
        m = model.CloverRef.from_gguf(mp)
        ar, st = m.forward(self.tokens)
        out = self.path("l.bin")
        run = lambda *args: self.assertEqual(cli.main(list(args), log=io.StringIO()), 0)
        run("logits", mp, "--tokens", ids, "--all", "--out", out)
        self.assertLess(np.abs(np.fromfile(out, np.float32).reshape(len(self.tokens), -1) - ar.numpy()).max(), 1e-5)
        with open(out + ".json") as f:
            self.assertEqual(json.load(f)["shape"], [len(self.tokens), self.cfg.n_vocab])
        run("logits", mp, "--tokens", ids, "--out", out)
        self.assertEqual(np.fromfile(out, np.float32).shape, (self.cfg.n_vocab,))
        run("denoise", mp, "--prefix", ids, "--block", blk, "--out", out)
        dn = m.denoise(self.block, st).numpy()
        self.assertLess(np.abs(np.fromfile(out, np.float32).reshape(len(self.block), -1) - dn).max(), 1e-5)
        sp = self.path("s.gguf")
        run("commit-state", mp, "--prefix", ids, "--block", blk, "--out", sp)
        committed = m.commit(self.block, st)[1]
        assert_states_equal(self, state_io.load_state(sp, self.cfg), committed, 1e-6)
        # start from a dumped state: denoise the same block again after the committed one
        gen = self.path("gen.json")
        run("generate", mp, "--tokens", ids, "--n", "10", "--mode", "verify", "--block-size", "4", "--out", gen)
        with open(gen) as f:
            self.assertEqual(json.load(f)["generated"], decode.ar_generate(m, self.tokens, 10))
        run("denoise", mp, "--state", sp, "--block", blk, "--out", out)
        dn2 = m.denoise(self.block, committed).numpy()
        self.assertLess(np.abs(np.fromfile(out, np.float32).reshape(len(self.block), -1) - dn2).max(), 1e-4)


if __name__ == "__main__":
    unittest.main()
