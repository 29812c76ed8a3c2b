"""The batched training pass (joint.py) equals torchref's AR pass and its denoising pass of each
block from the committed state, so training and inference agree on CLOVER-SPEC 2.

    /usr/bin/python3 -m unittest tools.train.test_joint
"""
import unittest

import torch

from tools.torchref.model import CloverRef
from tools.torchref.synth import random_weights, tiny_config
from tools.train.joint import joint_forward


class JointMatchesReference(unittest.TestCase):
    def check(self, pattern):
        cfg = tiny_config(pattern, n_embd=64, n_vocab=320, block_size=4)
        w = {n: torch.from_numpy(a).double() for n, a in random_weights(cfg, seed=3).items()}
        m = CloverRef(cfg, w)
        g = torch.Generator().manual_seed(0)
        N, L, B, mask = 2, 75, 4, cfg.mask_token_id
        tokens = torch.randint(0, 300, (N, L), generator=g)
        starts = torch.tensor([[1, 33, 64], [31, 32, 70]])                # any start, overlapping blocks too
        blocks = torch.stack([torch.stack([tokens[n, s:s + B] for s in row]) for n, row in enumerate(starts.tolist())])
        blocks[..., 1:] = torch.where(torch.rand(blocks[..., 1:].shape, generator=g) < 0.5, mask, blocks[..., 1:])
        lc, lb = joint_forward(m, tokens, blocks, starts)
        for n in range(N):
            ref, _ = m.forward(tokens[n])
            self.assertLess((lc[n] - ref).abs().max().item(), 1e-9)
            for j, s in enumerate(starts[n].tolist()):
                _, st = m.forward(tokens[n, :s])
                ref = m.denoise(blocks[n, j], st)
                self.assertLess((lb[n, j] - ref).abs().max().item(), 1e-9, f"block {n},{j} at {s}")

    def test_lllf(self):
        self.check("LLLF")

    def test_lflf(self):
        self.check("LFLF")

    def test_gradients(self):
        cfg = tiny_config("LF", n_embd=64, n_vocab=320, block_size=4)
        w = {n: torch.from_numpy(a).double().requires_grad_() for n, a in random_weights(cfg, seed=1).items()}
        m = CloverRef(cfg, w)
        tokens = torch.randint(0, 300, (1, 9))
        lc, lb = joint_forward(m, tokens, tokens[:, None, 2:6].clone(), torch.tensor([[2]]))
        (lc.sum() + lb.sum()).backward()
        self.assertGreater(w["blk.0.ssm_rev_beta.weight"].grad.abs().sum().item(), 0)


if __name__ == "__main__":
    unittest.main()
