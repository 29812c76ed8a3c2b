"""The clover-tiny evaluation pipeline on the shipped model (the CI subset of issue 5).

Runs tools/train/evaluate.py --quick (3 held-out prompts per family, AR, diffusion and spec in the
engine) and checks what must hold whatever the model's accuracy: guess-then-verify reproduces AR
greedy exactly, every family is scored in every mode, diffusion commits at least one token per
denoising pass. The tool-call scorer is checked on known good and bad outputs, so a broken parser
cannot pass as a model that never calls tools.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
MODEL = os.path.join(ROOT, "models", "clover-tiny.gguf")


class EvaluateQuick(unittest.TestCase):
    def test_three_modes_on_the_shipped_model(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r.json")
            p = subprocess.run([sys.executable, "-m", "tools.train.evaluate", MODEL, "--quick", "--out", out],
                               cwd=ROOT, capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr[-3000:])
            with open(out) as f:
                r = json.load(f)
        print(json.dumps(r, indent=1))
        self.assertEqual(set(r["families"]), {"drone", "tools", "capital", "math", "retrieval", "no_think"})
        for fam, s in r["families"].items():
            self.assertEqual(s["n"], 3, fam)
            for mode in ("ar", "diffusion", "spec"):
                self.assertTrue(0.0 <= s[mode] <= 1.0, (fam, mode))
                self.assertEqual(s["spec"], s["ar"], f"{fam}: spec must score exactly as AR")
        self.assertEqual(r["spec_equals_ar"], 1.0, "guess-then-verify must reproduce AR greedy")
        self.assertGreaterEqual(r["diffusion_tokens_per_denoising_pass"], 1.0)
        self.assertGreaterEqual(r["spec_tokens_per_cycle"], 1.0)
        self.assertEqual(set(r["tokens_per_s"]), {"ar", "diffusion", "spec"})

    def test_quant_quality_report(self):
        # tools/train/quant_quality.py on two presets: the Q8_0 requantisation is the original (KL 0),
        # Q4_0 is not, and every preset is scored in every mode.
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "q.json")
            p = subprocess.run([sys.executable, "-m", "tools.train.quant_quality", "--presets", "Q8_0,Q4_0", "--n", "1",
                                "--kl-examples", "2", "--out", out], cwd=ROOT, capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr[-3000:])
            with open(out) as f:
                rows = {r["preset"]: r for r in json.load(f)}
        self.assertEqual(rows["Q8_0"]["mean_kl"], 0.0)
        self.assertGreater(rows["Q4_0"]["mean_kl"], 0.0)
        self.assertLess(rows["Q4_0"]["mib"], rows["Q8_0"]["mib"])
        for r in rows.values():
            self.assertEqual(set(r["score"]), {"ar", "diffusion", "spec"})
            self.assertEqual(r["score"]["spec"], r["score"]["ar"])
        self.assertIn("| Q4_0 |", p.stdout)

    def test_tool_call_scorer(self):
        from tools.train import evaluate
        good = ('<think>\nTwo cities.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nLisbon\n'
                '</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n'
                '</parameter>\n</function>\n</tool_call><|im_end|>')
        self.assertTrue(evaluate.tool_calls_ok(good, ["Lisbon", "Oslo"]))
        self.assertFalse(evaluate.tool_calls_ok(good, ["Oslo", "Lisbon"]))
        self.assertFalse(evaluate.tool_calls_ok(good.replace("Oslo", "Bergen"), ["Lisbon", "Oslo"]))
        self.assertFalse(evaluate.tool_calls_ok("<think>\n</think>\n\nIt is warmer in Lisbon.<|im_end|>", ["Lisbon", "Oslo"]))

    def test_no_think_scorer(self):
        # After the template's empty think block, a think note of the model's own fails.
        from tools.train import evaluate
        meta = {"family": "capital", "capital": "Canberra"}
        self.assertTrue(evaluate.score("no_think", "Canberra<|im_end|>", meta))
        self.assertFalse(evaluate.score("no_think", "Australia.\n</think>\n\nCanberra<|im_end|>", meta))
        self.assertFalse(evaluate.score("no_think", "Sydney<|im_end|>", meta))


if __name__ == "__main__":
    unittest.main()
