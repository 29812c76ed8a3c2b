"""`clover run --device vulkan:0 -ngl N` with N below the layer count (the first layers on the CPU,
the rest on the device: backend/layer_split.h) gives the greedy tokens of -ngl 99 on a tiny F32
file, and loading says which layers went where. lavapipe must be named (vulkan:0); without a
Vulkan device the test skips."""
import json
import os
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLOVER = os.environ.get("CLOVER_BIN", os.path.join(ROOT, "build", "bin", "clover"))
DEVICE = "vulkan:" + os.environ.get("CLOVER_VK_TEST_DEVICE", "0")


def run(*args):
    p = subprocess.run([CLOVER, *args], capture_output=True, text=True, env={**os.environ, "CLOVER_VK_VALIDATE": "1"})
    if p.returncode != 0:
        raise AssertionError(f"clover {' '.join(args)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return p


class NglBelowTheLayerCount(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        devices = subprocess.run([CLOVER, "devices"], capture_output=True, text=True).stdout
        if "vulkan:0" not in devices:
            raise unittest.SkipTest("no Vulkan device (install mesa-vulkan-drivers)")
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.tmp.name, "tiny-f32.gguf")
        subprocess.run([CLOVER, "synth", "-q", cls.model, "--preset", "tiny", "--type", "f32"], check=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def generate(self, ngl, *extra):
        p = run("run", "-m", self.model, "-p", "Hello world, this is a test", "-n", "10", "-t", "1", "--temp", "0",
                "--ignore-eos", "--print-tokens", "--device", DEVICE, "-ngl", str(ngl), *extra)
        return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr

    def test_split_equals_every_layer_on_the_device(self):
        want, err = self.generate(99)
        self.assertEqual(len(want), 10)
        self.assertNotIn("on the CPU, layer", err)
        for ngl, where in ((1, "layers 0-2 on the CPU, layer 3 and the output head on vulkan:"),
                           (3, "layer 0 on the CPU, layers 1-3 and the output head on vulkan:")):
            got, err = self.generate(ngl)
            self.assertEqual(got, want, f"-ngl {ngl}")
            self.assertIn(f"-ngl {ngl}: {where}", err)
            self.assertIn("vulkan: device memory", err)
            self.assertNotIn("vulkan validation", err)  # the layer's messages (instance.cpp)

    def test_modes_and_experts_in_ram_on_a_split(self):
        want, _ = self.generate(99, "--mode", "spec")
        got, err = self.generate(2, "--mode", "spec", "--n-cpu-moe", "3")
        self.assertEqual(got, want)
        self.assertIn("experts of layer 2 in RAM", err)

    def test_an_override_onto_the_device_of_a_cpu_layer_is_refused(self):
        p = subprocess.run([CLOVER, "run", "-m", self.model, "-p", "Hi", "-n", "2", "--device", DEVICE, "-ngl", "1", "-ot",
                            r"blk\.0\.ffn_up_exps=vulkan"], capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("runs on the CPU", p.stderr)


if __name__ == "__main__":
    unittest.main()
