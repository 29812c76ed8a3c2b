"""GGUF writer/reader round trip for every metadata and tensor type; ggml quantiser known values.

    /usr/bin/python3 -m unittest discover tests/torchref
"""
import os
import struct
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from tools.torchref import gguf  # noqa: E402


def q4_0_scalar(x):
    """Literal port of ggml's quantize_row_q4_0_ref for one block (float32 scalars)."""
    x = [np.float32(v) for v in x]
    amax, vmax = np.float32(0), np.float32(0)
    for v in x:
        if amax < abs(v):
            amax, vmax = abs(v), v
    d = np.float32(vmax / np.float32(-8))
    idv = np.float32(1) / d if d != 0 else np.float32(0)
    qs = []
    for j in range(16):
        x0 = np.float32(np.float32(x[j] * idv) + np.float32(8.5))
        x1 = np.float32(np.float32(x[16 + j] * idv) + np.float32(8.5))
        qs.append(min(15, int(x0)) | (min(15, int(x1)) << 4))          # int() truncates like (int8_t)
    return struct.pack("<e", d) + bytes(qs)


def q8_0_scalar(x):
    """Literal port of ggml's quantize_row_q8_0_ref for one block (roundf = half away from zero)."""
    x = [np.float32(v) for v in x]
    amax = max(abs(v) for v in x)
    d = np.float32(amax / np.float32(127))
    idv = np.float32(1) / d if d != 0 else np.float32(0)
    q = []
    for v in x:
        f = float(np.float32(v * idv))
        r = int(abs(f) + 0.5) * (1 if f >= 0 else -1)
        q.append(r & 0xFF)
    return struct.pack("<e", d) + bytes(q)


class QuantiserKnownValues(unittest.TestCase):
    def test_q4_0_ramp(self):
        # x_j = j - 16: max |x| is -16 (j = 0) -> d = 2, id = 0.5, q = trunc(x/2 + 8.5) capped at 15
        x = np.arange(32, dtype=np.float32) - 16
        raw = gguf.quantize_q4_0(x).tobytes()
        lo = [(j + 1) // 2 for j in range(16)]
        hi = [min(15, 8 + (j + 1) // 2) for j in range(16)]
        self.assertEqual(raw[:2], bytes.fromhex("0040"))               # fp16(2.0) = 0x4000
        self.assertEqual(list(raw[2:]), [l | (h << 4) for l, h in zip(lo, hi)])
        np.testing.assert_array_equal(gguf.dequantize_q4_0(np.frombuffer(raw, np.uint8), 32)[0],
                                      (np.array(lo + hi) - 8) * 2.0)

    def test_q4_0_first_max_wins_and_zero_block(self):
        x = np.zeros(32, np.float32)
        x[3], x[9] = 4.0, -4.0                                         # equal magnitude: first (positive) wins
        raw = gguf.quantize_q4_0(x).tobytes()
        self.assertEqual(struct.unpack("<e", raw[:2])[0], -0.5)        # d = 4 / -8
        self.assertEqual(raw, q4_0_scalar(x))
        zero = gguf.quantize_q4_0(np.zeros(32, np.float32)).tobytes()
        self.assertEqual(zero, b"\0\x80" + bytes([0x88] * 16))        # d = 0 / -8 = -0.0, q = 8

    def test_q8_0_rounds_half_away_from_zero(self):
        x = np.zeros(32, np.float32)
        x[:6] = [127, 2.5, -2.5, 0.5, -0.5, 1.5]                        # d = 1, id = 1
        raw = gguf.quantize_q8_0(x).tobytes()
        self.assertEqual(raw[:2], bytes.fromhex("003c"))               # fp16(1.0) = 0x3C00
        self.assertEqual(list(np.frombuffer(raw[2:8], np.int8)), [127, 3, -3, 1, -1, 2])
        self.assertEqual(gguf.quantize_q8_0(np.zeros(32, np.float32)).tobytes(), bytes(34))

    def test_quantisers_match_scalar_ports(self):
        rng = np.random.default_rng(7)
        blocks = [rng.standard_normal(32) * s for s in (1e-3, 1, 300)]
        blocks.append(np.round(rng.standard_normal(32) * 8) / 2)       # many exact halves
        blocks.append(np.array([-7.9999] + [0.25 * k for k in range(31)]))
        for b in blocks:
            b = b.astype(np.float32)
            self.assertEqual(gguf.quantize_q4_0(b).tobytes(), q4_0_scalar(b))
            self.assertEqual(gguf.quantize_q8_0(b).tobytes(), q8_0_scalar(b))

    def test_bf16_round_to_nearest_even(self):
        x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -2.0, np.inf], np.float32)
        np.testing.assert_array_equal(gguf.bf16_bits_to_f32(gguf.f32_to_bf16_bits(x)),
                                      np.array([1.0, 1.0, 1 + 2 ** -6, -2.0, np.inf], np.float32))


class RoundTrip(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "t.gguf")

    def tearDown(self):
        self.dir.cleanup()

    def test_metadata_every_type(self):
        A = gguf.ARRAY
        kv = {
            "u8": (gguf.UINT8, 200), "i8": (gguf.INT8, -100), "u16": (gguf.UINT16, 60000),
            "i16": (gguf.INT16, -30000), "u32": (gguf.UINT32, 4000000000), "i32": (gguf.INT32, -2000000000),
            "f32": (gguf.FLOAT32, 0.5), "bool": (gguf.BOOL, True), "str": (gguf.STRING, "héllo <|mask|>"),
            "u64": (gguf.UINT64, 2 ** 63 + 5), "i64": (gguf.INT64, -2 ** 62), "f64": (gguf.FLOAT64, 1e-300),
            "arr.i32": ((A, gguf.INT32), [11, 11, 10, 0]), "arr.bool": ((A, gguf.BOOL), [True, False, True]),
            "arr.str": ((A, gguf.STRING), ["a", "Ġb", ""]), "arr.f32": ((A, gguf.FLOAT32), [1.5, -2.0]),
            "arr.arr": ((A, (A, gguf.UINT8)), [[1, 2], [3]]), "arr.empty": ((A, gguf.UINT32), []),
        }
        w = gguf.GGUFWriter()
        for k, (t, v) in kv.items():
            w.add(k, v, t)
        w.add_tensor("x", np.ones((2, 3), np.float32))
        w.write(self.path)
        f = gguf.GGUFFile(self.path)
        for k, (t, v) in kv.items():
            self.assertEqual(f.meta[k], v, k)
            self.assertEqual(f.meta_types[k], t, k)

    def test_tensors_every_type(self):
        rng = np.random.default_rng(1)
        x = rng.standard_normal((3, 2, 64)).astype(np.float32)
        cases = {gguf.F32: 0, gguf.F16: 1e-3, gguf.BF16: 8e-3, gguf.Q8_0: 1e-2, gguf.Q4_0: 0.2}
        w = gguf.GGUFWriter()
        for t in cases:
            w.add_tensor(f"t{t}", x, t)
        w.add_tensor("vec", np.arange(5, dtype=np.float32))                # 1-D, odd size
        w.write(self.path)
        f = gguf.GGUFFile(self.path)
        for t, tol in cases.items():
            info = f.tensors[f"t{t}"]
            self.assertEqual((info.ne, info.type), ([64, 2, 3], t))
            self.assertEqual(info.offset % 32, 0)
            y = f.tensor(f"t{t}")
            self.assertEqual(y.shape, x.shape)
            self.assertLessEqual(np.abs(y - x).max() / np.abs(x).max(), tol, gguf.TYPE_NAMES[t])
            # the stored bytes are exactly what the encoder produced, and decoding is exact
            enc = gguf.encode_tensor(x, t)
            self.assertEqual(bytes(f.raw(f"t{t}")), enc)
            np.testing.assert_array_equal(gguf.decode_tensor(np.frombuffer(enc, np.uint8), t, x.shape), y)
            # re-encoding a decoded quantised tensor reproduces it (a fixed point of the quantiser)
            if t != gguf.Q4_0:                                         # q4_0: d from the max, -8 grid is asymmetric
                self.assertEqual(gguf.encode_tensor(y, t), enc)
        np.testing.assert_array_equal(f.tensor("vec"), np.arange(5, dtype=np.float32))
        np.testing.assert_array_equal(f.tensor(f"t{gguf.F32}"), x)

    def test_raw_copy_keeps_bytes(self):
        x = np.random.default_rng(2).standard_normal((4, 32)).astype(np.float32)
        w = gguf.GGUFWriter()
        w.add_tensor("q", x, gguf.Q4_0)
        w.write(self.path)
        f = gguf.GGUFFile(self.path)
        w2 = gguf.GGUFWriter()
        w2.add_raw_tensor("q", f.tensors["q"].ne, gguf.Q4_0, f.raw("q"))
        p2 = self.path + "2"
        w2.write(p2)
        self.assertEqual(bytes(gguf.GGUFFile(p2).raw("q")), bytes(f.raw("q")))


if __name__ == "__main__":
    unittest.main()
