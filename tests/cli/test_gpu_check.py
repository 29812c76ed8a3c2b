"""bench/gpu-check.sh, the prepared check for a real GPU, exercised here on lavapipe.

`run --local` packs the binaries (as for the device tool's carry), runs a few Vulkan tests from
the pack, times the device layer and benches a tiny Q4_0 model in AR and diffusion; the table must
hold every step with its result. `run` as on the GPU machine, where this one has only lavapipe,
must say there is no GPU to measure and exit 3, not measure the CPU under a GPU's name.
"""
import os
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "gpu-check.sh")
BUILD = os.environ.get("CLOVER_BUILD_DIR", os.path.join(ROOT, "build"))


def has_vulkan():
    p = subprocess.run([os.path.join(BUILD, "bin", "clover"), "devices"], capture_output=True, text=True)
    return p.returncode == 0 and "vulkan:0" in p.stdout


@unittest.skipUnless(has_vulkan(), "no Vulkan device (scripts/setup.sh --test installs lavapipe)")
class GpuCheck(unittest.TestCase):
    def test_local_run_and_the_machine_without_a_gpu(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, GPU_CHECK_PACK=os.path.join(tmp, "pack"), OUT=os.path.join(tmp, "out"),
                       CLOVER_BUILD_DIR=BUILD, TMPDIR=tmp)
            p = subprocess.run(["bash", SCRIPT, "run", "--local", "--budget", "900"], env=env, cwd=ROOT,
                               capture_output=True, text=True)
            print(p.stdout[-4000:], p.stderr[-2000:])
            self.assertEqual(p.returncode, 0, p.stderr[-2000:])
            with open(os.path.join(tmp, "out", "gpu-check.md")) as f:
                table = f.read()
            for t in ("vulkan_ops_test", "vulkan_executor_test", "vulkan_denoise_test"):
                line = next(l for l in table.splitlines() if l.startswith(f"| {t} "))
                self.assertRegex(line, r"\| [1-9]\d* passed, 0 failed", line)
            self.assertRegex(table, r"tiny q4_0 on vulkan:0 \| pp32 ar [0-9.]+ t/s; tg8 ar [0-9.]+ t/s.*tg8 diffusion "
                                    r"[0-9.]+ t/s.*denoising pass [0-9.]+ ms = [0-9.]+ AR steps")
            self.assertIn("mat-vec Q4_0 4096 x 2048", table)
            for what in ("decode", "prefill", "diffusion"):  # GPU time by shader (CLOVER_VK_PROFILE)
                self.assertRegex(table, rf"profile {what} \| [1-9]\d* submissions, [1-9]\d* ops, [1-9]\d* barriers needed "
                                        rf"\(one after every op while profiling\), [0-9.]+ ms of GPU time")
                self.assertIn(f"## GPU time by shader: {what}", table)
            self.assertRegex(table, r"matmul_q4_0(_experts)? \[")
            for n in (0, 8, 32):  # prefill with experts in RAM, computed by the CPU or streamed
                self.assertRegex(table, rf"prefill, --stream-experts {n} \| pp512 ar [0-9.]+ t/s")
            with open(os.path.join(tmp, "pack", "MANIFEST")) as f:
                manifest = f.read()
            for f in ("bin/clover", "bin/vulkan_executor_test", "lib/libvulkan.so.1", "lib/libfmt.so.9"):
                self.assertIn(f, manifest)
            self.assertFalse([n for n in os.listdir(tmp) if n.endswith(".gguf")], "the model file is left behind")

            # As on the GPU machine: the pack exists, but this machine's only Vulkan device is the CPU.
            env["OUT"] = os.path.join(tmp, "out2")
            p = subprocess.run(["bash", SCRIPT, "run", "--budget", "60"], env=env, cwd=ROOT, capture_output=True, text=True)
            self.assertEqual(p.returncode, 3, p.stdout[-2000:] + p.stderr[-2000:])
            self.assertIn("only CPU-type Vulkan devices", p.stdout)

    def test_run_without_a_pack_says_how_to_make_one(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, GPU_CHECK_PACK=os.path.join(tmp, "none"), OUT=os.path.join(tmp, "out"))
            p = subprocess.run(["bash", SCRIPT, "run"], env=env, cwd=ROOT, capture_output=True, text=True)
            self.assertEqual(p.returncode, 2)
            self.assertIn("bench/gpu-check.sh pack", p.stderr)


if __name__ == "__main__":
    unittest.main()
