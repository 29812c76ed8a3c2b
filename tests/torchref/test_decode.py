"""The greedy reference decoders (tools/torchref/decode.py).

    /usr/bin/python3 -m unittest discover tests/torchref
"""
import math
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from tools.torchref import decode, model, synth  # noqa: E402

torch.set_num_threads(1)
PROMPT = [250, 251, 17, 300, 5]


def make(seed=0):
    cfg = synth.tiny_config("LLLF")
    w = synth.random_weights(cfg, seed, reverse=True)
    return model.CloverRef(cfg, {n: torch.from_numpy(a).double() for n, a in w.items()})


class Drafter:
    """Wraps a model; its denoising pass returns one-hot logits of the AR greedy continuation
    (a perfect drafter), optionally with one wrong draft position, and counts denoising passes."""

    def __init__(self, m, wrong_at=None):
        self.m, self.cfg, self.wrong_at, self.passes = m, m.cfg, wrong_at, 0

    def __getattr__(self, name):
        return getattr(self.m, name)

    def denoise(self, block, state, use_reverse=True):
        self.passes += 1
        toks, st, p = [], state, block[0]
        for _ in range(len(block)):
            logits, st = self.m.forward([p], st)
            p = int(logits[-1].argmax())
            toks.append(p)
        if self.wrong_at is not None:
            toks[self.wrong_at] = (toks[self.wrong_at] + 1) % 300
        return torch.nn.functional.one_hot(torch.tensor(toks), self.cfg.n_vocab).double() * 30


class WeakDrafter(Drafter):
    """Same choices, but every probability ~ 2/(V+1), far below tau."""

    def denoise(self, block, state, use_reverse=True):
        return super().denoise(block, state) / 30 * math.log(2)


class Decoders(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = make()
        cls.ar = decode.ar_generate(cls.m, PROMPT, 24)

    def test_verify_equals_ar_with_the_model_drafter(self):
        for B in (2, 4, 8):
            self.assertEqual(decode.verify_generate(self.m, PROMPT, 24, block_size=B), self.ar, B)

    def test_verify_equals_ar_with_perfect_and_faulty_drafters(self):
        perfect = Drafter(self.m)
        self.assertEqual(decode.verify_generate(perfect, PROMPT, 24, block_size=8), self.ar)
        self.assertEqual(perfect.passes, 3)                              # 8 tokens accepted per pass
        faulty = Drafter(self.m, wrong_at=2)                               # d3 wrong: accept p, d1, d2
        self.assertEqual(decode.verify_generate(faulty, PROMPT, 24, block_size=8), self.ar)
        self.assertEqual(faulty.passes, 8)

    def test_end_token_stops_every_decoder(self):
        eos = (self.ar[9],)
        stop = self.ar[:self.ar.index(eos[0]) + 1]
        self.assertEqual(decode.ar_generate(self.m, PROMPT, 24, eos), stop)
        self.assertEqual(decode.verify_generate(Drafter(self.m), PROMPT, 24, eos, block_size=8), stop)
        self.assertEqual(decode.verify_generate(self.m, PROMPT, 24, eos, block_size=4), stop)
        self.assertEqual(decode.diffusion_generate(Drafter(self.m), PROMPT, 24, eos, block_size=8), stop)
        self.assertEqual(decode.diffusion_generate(WeakDrafter(self.m), PROMPT, 24, eos, block_size=8), stop)

    def test_diffusion_with_block_of_one_is_ar(self):
        self.assertEqual(decode.diffusion_generate(self.m, PROMPT, 24, block_size=1), self.ar)

    def test_diffusion_with_a_perfect_denoiser_is_ar(self):
        d = Drafter(self.m)
        self.assertEqual(decode.diffusion_generate(d, PROMPT, 24, block_size=8), self.ar)
        self.assertEqual(d.passes, 3)                                     # one-hot * 30: p ~ 1 >= tau

    def test_diffusion_threshold_rules(self):
        B, mask = 8, self.m.cfg.mask_token_id
        # no probability reaches tau: one position per pass (equal confidences: the lowest first)
        d = WeakDrafter(self.m)
        out = decode.diffusion_generate(d, PROMPT, 2 * B, block_size=B)
        self.assertEqual(out, self.ar[:2 * B])
        self.assertEqual(d.passes, 2 * (B - 1))
        self.assertNotIn(mask, out)
        # tau ~ 0: every mask filled from the first pass
        out = decode.diffusion_generate(self.m, PROMPT, B, block_size=B, tau=1e-30)
        _, st = self.m.forward(PROMPT)
        first = self.m.denoise([out[0]] + [mask] * (B - 1), st).argmax(-1).tolist()
        self.assertEqual(out[1:], first[:B - 1])

    def test_length_limit_inside_a_block(self):
        out = decode.diffusion_generate(self.m, PROMPT, 11, block_size=8)
        self.assertEqual(len(out), 11)
        self.assertNotIn(self.m.cfg.mask_token_id, out)

    def test_mask_token_never_proposed(self):
        logits = torch.zeros(2, 10, dtype=torch.float64)
        logits[:, 9] = 5.0                                               # the mask is the argmax
        logits[1, 3] = 1.0
        tok, logp = decode._best_non_mask(logits, 9)
        self.assertEqual(tok[1], 3)
        self.assertAlmostEqual(logp[1], 1.0 - math.log(math.exp(5) + math.exp(1) + 8), places=12)
        self.assertNotEqual(tok[0], 9)


if __name__ == "__main__":
    unittest.main()
