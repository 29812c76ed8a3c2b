"""`clover run --show-blocks` on the shipped model, in both of its forms.

On a terminal (a pseudo-terminal here, 100 columns): each block is one line redrawn in place
(carriage return + erase line, no line per pass), no line is wider than the terminal, no end token
or anything after it is drawn, and the answer comes after the blocks, apart from them. Without a
terminal: one plain line per denoising pass (as many as the run's own count), no escape sequences.
"""
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLOVER = os.environ.get("CLOVER_BIN", os.path.join(ROOT, "build", "bin", "clover"))
MODEL = os.path.join(ROOT, "models", "clover-tiny.gguf")
# A sort fills one block over several passes; the drone message needs several blocks.
SORT = "Sort this list: [12, 5, 33, 8, 21]"
DRONES = ("Dispatch orders: drone D-07 maps the north field; D-12 delivers insulin to Clinic 4. "
          "Reply with the JSON list of orders.")
CASES = (("diffusion", SORT), ("diffusion", DRONES), ("spec", DRONES))
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
END_TOKENS = ("<|endoftext|>", "<|im_end|>")
STATS = re.compile(r"mode (\w+): (\d+) passes \((\d+) denoising, [0-9.]+ s\), (\d+) blocks")


def args(mode, prompt):
    return ["run", "-m", MODEL, "--chat", "-p", prompt, "-n", "160", "-t", "1", "--show-blocks", "--mode", mode]


def plain_run(mode, prompt):
    p = subprocess.run([CLOVER, *args(mode, prompt)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    return p


def run_on_pty(args, columns=100):
    """Runs clover with stdout and stderr on one pseudo-terminal; returns everything it wrote."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(CLOVER, [CLOVER, *args])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    out = b""
    while True:
        r, _, _ = select.select([fd], [], [], 60)
        if not r:
            os.kill(pid, 9)
            raise AssertionError("clover run hung on the terminal")
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out.decode(errors="replace")[-2000:]
    return out.decode("utf-8", errors="replace").replace("\r\n", "\n")


class ShowBlocks(unittest.TestCase):
    def test_terminal_redraws_each_block_in_place(self):
        multi_pass = False
        for mode, prompt in CASES:
            with self.subTest(mode=mode, prompt=prompt[:20]):
                out = run_on_pty(args(mode, prompt), columns=100)
                self.assertIn("\r\x1b[2K", out, "a block line is redrawn in place")
                stats = STATS.search(out)
                self.assertIsNotNone(stats, out[-1000:])
                denoising, blocks = int(stats.group(3)), int(stats.group(4))
                head = out[:out.index("prompt:")]  # the blocks, then the answer
                lines = head.split("\n")
                block_lines = [ln for ln in lines if "\r\x1b[2K" in ln]
                # One line per block, numbered 1, 2, 3, ...
                self.assertEqual(len(block_lines), blocks)
                numbers = [int(re.search(r"block\s+(\d+)", ANSI.sub("", ln.split("\r")[-1])).group(1)) for ln in block_lines]
                self.assertEqual(numbers, list(range(1, blocks + 1)))
                # Each pass redraws its block's line (spec: the draft, then the verified draft).
                redraws = sum(ln.count("\r\x1b[2K") for ln in block_lines)
                self.assertEqual(redraws, denoising * (2 if mode == "spec" else 1))
                multi_pass |= mode == "diffusion" and denoising > blocks
                for ln in block_lines:
                    for frame in ln.split("\r"):
                        visible = ANSI.sub("", frame)
                        self.assertLessEqual(len(visible), 99, f"wider than the terminal: {visible!r}")
                        for t in END_TOKENS:
                            self.assertNotIn(t, visible, "nothing of the end token or after it is drawn")
                # The answer comes after the last block line, apart from it, and is the whole answer.
                answer = "\n".join(lines[lines.index(block_lines[-1]) + 1:])
                self.assertNotIn("\x1b[48;5", answer, "no block drawing in the answer")
                self.assertEqual(answer.strip(), plain_run(mode, prompt).stdout.strip())
        self.assertTrue(multi_pass, "a block took several passes on one line")

    def test_without_a_terminal_one_plain_line_per_pass(self):
        for mode, prompt in CASES:
            with self.subTest(mode=mode, prompt=prompt[:20]):
                p = plain_run(mode, prompt)
                self.assertNotIn("\x1b", p.stderr, "no escape sequences without a terminal")
                lines = [ln for ln in p.stderr.splitlines() if ln.startswith("block ")]
                denoising = int(STATS.search(p.stderr).group(3))
                if mode == "diffusion":
                    self.assertEqual(len(lines), denoising)
                    self.assertTrue(all(re.match(r"block \d+ pass \d+: ", ln) for ln in lines), lines[:3])
                else:
                    self.assertEqual(len([ln for ln in lines if " draft: " in ln]), denoising)
                    self.assertEqual(len([ln for ln in lines if " verify: kept " in ln]), denoising)
                for ln in lines:
                    for t in END_TOKENS:
                        self.assertNotIn(t, ln)
                self.assertGreater(len(p.stdout.strip()), 0, "the answer streams to stdout as usual")


if __name__ == "__main__":
    unittest.main()
