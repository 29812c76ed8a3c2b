"""The clover-tiny evaluation on the Vulkan executor (lavapipe in CI) against the same run on the CPU.

tools/train/evaluate.py --n 1 (one held-out prompt per family, AR, diffusion and spec) with
--device vulkan:0 and with --device cpu: the scores of every family in every mode are the same
(the backends agree to ~1e-5 in the logits, so a greedy answer could only part at a near-tie,
which these prompts do not have: measured identical on the 18-prompt quick set), guess-then-verify
reproduces AR on the GPU, and block diffusion commits as many tokens per denoising pass (within 5 %).
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "clover-tiny.gguf")
CLOVER = os.environ.get("CLOVER_BIN", os.path.join(ROOT, "build", "bin", "clover"))


def has_vulkan():
    p = subprocess.run([CLOVER, "devices"], capture_output=True, text=True)
    return p.returncode == 0 and "vulkan:0" in p.stdout


def evaluate(device, tmp):
    out = os.path.join(tmp, f"{device.replace(':', '_')}.json")
    p = subprocess.run([sys.executable, "-m", "tools.train.evaluate", MODEL, "--n", "1", "--device", device, "--out", out],
                       cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"evaluate --device {device} failed:\n{p.stderr[-3000:]}")
    with open(out) as f:
        return json.load(f)


@unittest.skipUnless(has_vulkan(), "no Vulkan device (scripts/setup.sh --test installs lavapipe)")
class EvaluateOnVulkan(unittest.TestCase):
    def test_vulkan_scores_as_the_cpu(self):
        with tempfile.TemporaryDirectory() as tmp:
            cpu, vk = evaluate("cpu", tmp), evaluate("vulkan:0", tmp)
        print(json.dumps({"cpu": cpu, "vulkan": vk}, indent=1))
        self.assertEqual(vk["device"], "vulkan:0")
        self.assertEqual(set(vk["families"]), set(cpu["families"]))
        for fam, s in cpu["families"].items():
            for mode in ("ar", "diffusion", "spec"):
                self.assertEqual(vk["families"][fam][mode], s[mode], f"{fam} {mode}: Vulkan and CPU score differently")
        self.assertEqual(vk["spec_equals_ar"], 1.0, "guess-then-verify on the GPU must reproduce AR greedy")
        self.assertEqual(vk["diffusion_equals_ar"], cpu["diffusion_equals_ar"])
        c, v = cpu["diffusion_tokens_per_denoising_pass"], vk["diffusion_tokens_per_denoising_pass"]
        self.assertLessEqual(abs(v - c), 0.05 * c, f"tokens per denoising pass: Vulkan {v}, CPU {c}")


if __name__ == "__main__":
    unittest.main()
