"""The plain C++ benchmarks in bench/ run end to end on a tiny synthetic model and print their
markdown row; bad flags are refused with a message and exit status 2 (never speed).

    BENCH_DIR=build/bench CLOVER_BIN=build/bin/clover /usr/bin/python3 -m unittest -v tests/cli/test_bench_tools.py
"""
import os
import re
import subprocess
import tempfile
import unittest

CLOVER = os.environ.get("CLOVER_BIN", "build/bin/clover")
BENCH = os.environ.get("BENCH_DIR", "build/bench")


class BenchTools(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.tmp.name, "tiny.gguf")
        subprocess.run([CLOVER, "synth", "-q", cls.model, "--preset", "tiny", "--layout", "official"], check=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_bench(self, name, *args):
        return subprocess.run([os.path.join(BENCH, name), self.model, *args], capture_output=True, text=True, timeout=120)

    def test_block_pass_bench_row(self):
        for rows in ("31", "4"):
            r = self.run_bench("block_pass_bench", "--reps", "1", "--rows", rows)
            self.assertEqual(r.returncode, 0, r.stderr)
            cells = [c.strip() for c in r.stdout.strip().split("|")[1:-1]]
            self.assertEqual(len(cells), 8, r.stdout)
            self.assertIn(f"{rows} rows of logits", cells[3])

    def test_load_warmup_probe_lines(self):
        # The read (how it was done), then one rate a second, with and without the mprotect.
        for protect in ("0", "1"):
            r = self.run_bench("load_warmup_probe", "--seconds", "2", "--protect", protect)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.strip().splitlines()
            self.assertEqual(len(lines), 3, r.stdout)
            self.assertRegex(lines[0], r"^read 0\.01 GB in [0-9.]+ s \((O_DIRECT|through the page cache)\)$")
            for s, line in enumerate(lines[1:], 1):
                m = re.match(rf"^t = +{s} s: random 576 KiB chunks read at ([0-9.]+) GB/s$", line)
                self.assertTrue(m, line)
                self.assertGreater(float(m.group(1)), 0, line)

    def test_multi_pass_bench_row(self):
        r = self.run_bench("multi_pass_bench", "--seqs", "2", "--reps", "1", "--prefix", "8")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("| "), r.stdout)

    def test_first_tokens_bench_rows(self):
        # One row per loading mode: the first cell names it, the page-cache cell says what was asked.
        for args, first_cell, cache in ((["--prefault", "1", "--wait", "1"], "background, waited for", "cached"),
                                        (["--prefault", "0", "--drop-cache", "1"], "off", "evicted"),
                                        (["--mmap", "0"], "background, not waited for (--no-mmap)", "cached"),
                                        (["--prefault", "0", "--mlock", "1"], "off (--mlock)", "cached")):
            r = self.run_bench("first_tokens_bench", "--tokens", "4", "-t", "1", *args)
            self.assertEqual(r.returncode, 0, r.stderr)
            cells = [c.strip() for c in r.stdout.strip().split("|")[1:-1]]
            self.assertEqual(len(cells), 9, r.stdout)
            self.assertEqual((cells[0], cells[1]), (first_cell, cache), r.stdout)
            self.assertGreater(float(cells[5]), 0, r.stdout)  # first tokens/s
            self.assertGreater(float(cells[6]), 0, r.stdout)  # steady tokens/s

    def test_expert_runner_bench_rows(self):
        # Its own synthetic experts (no model file): the header names the layout, one row per batch,
        # the roofline read and the weights' rate both positive.
        for repack, layout in (("0", "(Q4_0,"), ("1", "(Q4_0 repacked,")):
            r = subprocess.run([os.path.join(BENCH, "expert_runner_bench"), "-t", "1", "--reps", "1", "--repack", repack],
                               capture_output=True, text=True, timeout=200)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(layout, r.stdout)
            self.assertGreater(float(r.stdout.split("memory read bandwidth ")[1].split(" GB/s")[0]), 0, r.stdout)
            rows = [line for line in r.stdout.splitlines() if line.startswith("| 1 |") or line.startswith("| 32 |")]
            self.assertEqual(len(rows), 2, r.stdout)
            for row in rows:
                self.assertGreater(float(row.split("|")[5]), 0, row)  # weights read GB/s

    def test_bad_flags_are_refused(self):
        for name, args, msg in (("block_pass_bench", ["--bogus", "1"], "unknown option --bogus"),
                                ("block_pass_bench", ["--reps"], "--reps needs a value"),
                                ("block_pass_bench", ["--rows", "99"], "--rows must be"),
                                ("multi_pass_bench", ["--seqs", "two"], "--seqs takes an integer"),
                                ("first_tokens_bench", ["--mlock"], "--mlock needs a value"),
                                ("load_warmup_probe", ["--seconds", "x"], "--seconds takes an integer")):
            r = self.run_bench(name, *args)
            self.assertNotEqual(r.returncode, 0, name)
            self.assertIn(msg, r.stderr, name)
        # expert_runner_bench takes no model file: Q8_0 experts are not repacked, types are 0..2.
        for args, msg in ((["--repack", "1", "--type", "1"], "--repack 0|1 (Q4_0, Q4_K)"),
                          (["--type", "3"], "--type 0|1|2 (Q4_0|Q8_0|Q4_K)"), (["--bogus", "1"], "usage:")):
            r = subprocess.run([os.path.join(BENCH, "expert_runner_bench"), *args], capture_output=True, text=True, timeout=60)
            self.assertNotEqual(r.returncode, 0, name)
            self.assertIn(msg, r.stderr, name)


if __name__ == "__main__":
    unittest.main()
