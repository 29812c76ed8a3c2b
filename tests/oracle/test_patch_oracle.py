#!/usr/bin/python3
"""`clover patch` against llama.cpp v0.5.0 (node-llama-cpp 3.22.1): the patched file loads and computes
what clover.cpp computes on the original official file.

A synthetic F32 official file (architecture clover_moe, ssm_rev_* tensors, ssm_a holding A_log) is
patched with `clover patch --target qwen35moe`; llama.cpp in exact mode (flash attention off, F32 KV
cache) runs the patched file, `clover logits` runs the ORIGINAL file, and every logit of a 200-token
prompt is compared. llama.cpp must refuse the unpatched file (it does not know clover_moe) and a file
patched with --keep-diffusion-tensors (it rejects extra tensors).

Run: /usr/bin/python3 -m unittest -v tests/oracle/test_patch_oracle.py   (CLOVER_BIN overrides the binary)
"""
import os
import shutil
import subprocess
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_ar_oracle as ar  # noqa: E402  (shared helpers: Work, compare, prompt_ids)


def oracle_refuses(model):
    """Runs llama.cpp on `model`; returns its error output if it refused to load it, else None."""
    p = subprocess.run(["node", ar.ORACLE, model, "info", "--compact"], capture_output=True, text=True)
    return (p.stderr + p.stdout) if p.returncode != 0 else None


@unittest.skipUnless(ar.HAVE_ORACLE, "node or node_modules/node-llama-cpp missing: run scripts/setup.sh")
class PatchedFileMatchesLlamaCpp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.w = ar.Work()
        cls.official = cls.w.synth("official", "--layout", "official")
        cls.patched = cls.w.path("patched.gguf")
        ar.run([ar.CLOVER, "patch", cls.official, cls.patched, "--target", "qwen35moe", "-q"])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.w.dir, ignore_errors=True)

    def test_llamacpp_on_patched_equals_clover_on_official(self):
        ids = self.w.write_ids("prompt", ar.prompt_ids(200, 500))
        oracle = self.w.oracle_logits(self.patched, ids)
        engine = self.w.engine_logits(self.official, ids)
        self.assertEqual(oracle.shape[0], 200)
        ar.compare(self, oracle, engine, 1e-4, "llama.cpp(patched qwen35moe) vs clover(official), F32")
        # The engine itself computes the same on both files, bit for bit (same -exp(A_log) in float).
        np.testing.assert_array_equal(self.w.engine_logits(self.patched, ids), engine)

    def test_llamacpp_refuses_the_unpatched_official_file(self):
        err = oracle_refuses(self.official)
        self.assertIsNotNone(err, "llama.cpp v0.5.0 loaded the official clover_moe file")
        self.assertIn("unknown model architecture: 'clover_moe'", err)

    def test_llamacpp_refuses_kept_diffusion_tensors(self):
        kept = self.w.path("kept.gguf")
        ar.run([ar.CLOVER, "patch", self.official, kept, "--keep-diffusion-tensors", "-q"])  # warns on stderr
        err = oracle_refuses(kept)
        self.assertIsNotNone(err, "llama.cpp loaded a file with the ssm_rev_* tensors")
        self.assertIn("wrong number of tensors", err)


if __name__ == "__main__":
    unittest.main()
