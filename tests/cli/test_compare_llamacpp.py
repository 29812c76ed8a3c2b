"""bench/compare-llamacpp end to end on a tiny synthetic qwen35moe file: both engines run, the
records, medians, ratios, table and chart come out consistent. Speeds are never asserted."""
import json
import math
import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLOVER = os.environ.get("CLOVER_BIN", str(ROOT / "build" / "bin" / "clover"))


@unittest.skipUnless(shutil.which("node") and (ROOT / "node_modules" / "node-llama-cpp").exists(), "node or node-llama-cpp missing")
class CompareLlamaCpp(unittest.TestCase):
    def test_tiny_model_side_by_side(self):
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            model = d / "tiny-qwen.gguf"
            subprocess.run([CLOVER, "synth", "--preset", "tiny", "--type", "q4_0", "--layout", "qwen35moe", "-q", str(model)], check=True)
            out = subprocess.run([str(ROOT / "bench" / "compare-llamacpp"), "--models", "tiny", "--gguf", f"tiny={model}", "--clover", CLOVER,
                                  "--pp", "16", "--tg", "4", "--threads", "1", "--reps", "2", "--clover-arg=--no-mmap", "--json", str(d / "r.json"),
                                  "--md", str(d / "r.md"), "--chart", str(d / "r.png")],
                                 check=True, capture_output=True, text=True)
            res = json.loads((d / "r.json").read_text())
            # 2 rounds x 2 engines x (pp16, tg4), alternating which engine goes first.
            recs = res["records"]
            self.assertEqual(len(recs), 8)
            self.assertEqual([r["engine"] for r in recs if r["test"] == "pp16"], ["clover", "llama.cpp", "llama.cpp", "clover"])
            for r in recs:
                self.assertEqual(r["threads"], 1)
                self.assertTrue(r["median_ts"] > 0 and math.isfinite(r["median_ts"]), r)
                self.assertGreater(r["process_peak_rss_bytes"], 1 << 20)
            rows = {r["test"]: r for r in res["rows"]}
            self.assertEqual(set(rows), {"pp16", "tg4"})
            for test, row in rows.items():
                for eng, key in (("llama.cpp", "llama"), ("clover", "clover")):
                    samples = sorted(r["median_ts"] for r in recs if r["engine"] == eng and r["test"] == test)
                    self.assertAlmostEqual(row[key][0], (samples[0] + samples[1]) / 2)  # median of 2 rounds
                    self.assertEqual((row[key][3], row[key][4]), (samples[0], samples[1]))  # the rounds' range
                self.assertAlmostEqual(row["ratio"], row["clover"][0] / row["llama"][0])
                self.assertIn(f"| tiny | {test} |", out.stdout)
            self.assertIn("clover bench given --no-mmap)", out.stdout)
            self.assertEqual(out.stdout.strip(), (d / "r.md").read_text().strip())
            self.assertEqual((d / "r.png").read_bytes()[:8], b"\x89PNG\r\n\x1a\n")

    def test_clover_args_reach_clover_bench(self):
        with tempfile.TemporaryDirectory() as d:
            model = Path(d) / "tiny-qwen.gguf"
            subprocess.run([CLOVER, "synth", "--preset", "tiny", "--type", "q4_0", "--layout", "qwen35moe", "-q", str(model)], check=True)
            r = subprocess.run([str(ROOT / "bench" / "compare-llamacpp"), "--models", "tiny", "--gguf", f"tiny={model}", "--clover", CLOVER,
                                "--pp", "16", "--tg", "0", "--threads", "1", "--reps", "1", "--chart", "", "--clover-arg=--no-such-flag"],
                               capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("--no-such-flag", r.stderr)
            self.assertIn("failed with exit code", r.stderr)

    def test_bad_arguments_are_named(self):
        r = subprocess.run([str(ROOT / "bench" / "compare-llamacpp"), "--models", "nosuch", "--clover", CLOVER], capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("unknown model 'nosuch'", r.stderr)
        r = subprocess.run([str(ROOT / "bench" / "compare-llamacpp"), "--pp", "5x", "--clover", CLOVER], capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("'5x' is not a comma-separated list", r.stderr)


if __name__ == "__main__":
    unittest.main()
