"""GGUF reader and writer (numpy only), for the PyTorch reference and for exporting trained models.

Reader: `GGUFFile(path)` memory-maps the file; `.meta` holds every key/value (python scalars, str,
lists; arrays of numbers come back as lists), `.tensors` maps name -> TensorInfo, and
`.tensor(name)` returns the tensor dequantised to float32 in numpy order (ggml {ne0, ne1, ...}
-> numpy shape (..., ne1, ne0)).

Writer: `GGUFWriter().add(key, value, vtype)` / `.add_tensor(name, array, ggml_type)` / `.write(path)`.
Quantisers are bit-identical to ggml's `quantize_row_q4_0_ref` / `quantize_row_q8_0_ref`
(ggml/src/ggml-quants.c): float32 arithmetic, fp16 scales rounded to nearest even.
"""
import struct

import numpy as np

# ---- GGUF value types (ggml/include/gguf.h) ----
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
_SCALAR_FMT = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
               FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}
_SCALAR_NP = {UINT8: np.uint8, INT8: np.int8, UINT16: np.uint16, INT16: np.int16, UINT32: np.uint32,
              INT32: np.int32, FLOAT32: np.float32, BOOL: np.bool_, UINT64: np.uint64,
              INT64: np.int64, FLOAT64: np.float64}

# ---- ggml tensor types (ggml/include/ggml.h) ----
F32, F16, Q4_0, Q8_0, BF16 = 0, 1, 2, 8, 30
TYPE_NAMES = {F32: "F32", F16: "F16", Q4_0: "Q4_0", Q8_0: "Q8_0", BF16: "BF16"}
# (elements per block, bytes per block)
_BLOCK = {F32: (1, 4), F16: (1, 2), BF16: (1, 2), Q4_0: (32, 18), Q8_0: (32, 34)}

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32


def type_from_name(name):
    for t, n in TYPE_NAMES.items():
        if n.lower() == name.lower():
            return t
    raise ValueError(f"unknown ggml type {name!r}")


# ============================================================ float conversions

def f32_to_bf16_bits(x):
    """ggml_compute_fp32_to_bf16: round to nearest even, NaN kept quiet. -> uint16"""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = (u + (0x7FFF + ((u >> 16) & 1))) >> 16
    quiet = (u >> 16) | 64
    return np.where(nan, quiet, rounded).astype(np.uint16)


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_to_bf16(x):
    """float32 values rounded to bf16 precision (returned as float32)."""
    return bf16_bits_to_f32(f32_to_bf16_bits(x))


# ============================================================ block quantisers (ggml reference)

def quantize_q8_0(x):
    """quantize_row_q8_0_ref over the last axis. x: (..., n), n % 32 == 0 -> uint8 bytes (..., n/32*34)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    blocks = x.reshape(-1, 32)                                        # (nb, 32)
    amax = np.abs(blocks).max(axis=1)                                 # (nb,)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = (blocks * idv[:, None]).astype(np.float32)
    v64 = v.astype(np.float64)                                        # roundf: half away from 0
    q = np.trunc(v64 + np.copysign(0.5, v64))
    out = np.empty((blocks.shape[0], 34), dtype=np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.astype(np.int8).view(np.uint8)
    return out.reshape(*x.shape[:-1], x.shape[-1] // 32 * 34)


def quantize_q4_0(x):
    """quantize_row_q4_0_ref over the last axis. x: (..., n), n % 32 == 0 -> uint8 bytes (..., n/32*18)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    blocks = x.reshape(-1, 32)                                        # (nb, 32)
    # the value with the largest magnitude, first one on ties (strict '<' in the C loop)
    imax = np.abs(blocks).argmax(axis=1)
    vmax = blocks[np.arange(blocks.shape[0]), imax]
    d = (vmax / np.float32(-8)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = (blocks * idv[:, None]).astype(np.float32)                    # float32 product, as in C
    s = (v + np.float32(8.5)).astype(np.float32)                      # float32 sum, as in C
    qi = np.minimum(np.trunc(s), 15).astype(np.int64)                 # (int8_t) truncates toward 0
    qi = np.clip(qi, 0, 15)                                           # s >= 0 in practice (|v| <= 8)
    out = np.empty((blocks.shape[0], 18), dtype=np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = (qi[:, :16] | (qi[:, 16:] << 4)).astype(np.uint8)
    return out.reshape(*x.shape[:-1], x.shape[-1] // 32 * 18)


def dequantize_q8_0(raw, n):
    """raw: uint8 bytes (rows, n/32*34) -> float32 (rows, n)."""
    b = raw.reshape(-1, 34)
    d = b[:, 0:2].copy().view(np.float16).astype(np.float32)          # (nb, 1)
    q = b[:, 2:].copy().view(np.int8).astype(np.float32)              # (nb, 32)
    return (q * d).reshape(-1, n)


def dequantize_q4_0(raw, n):
    """raw: uint8 bytes (rows, n/32*18) -> float32 (rows, n). Low nibbles = elements 0..15."""
    b = raw.reshape(-1, 18)
    d = b[:, 0:2].copy().view(np.float16).astype(np.float32)          # (nb, 1)
    qs = b[:, 2:]
    lo = (qs & 0x0F).astype(np.float32) - 8
    hi = (qs >> 4).astype(np.float32) - 8
    return (np.concatenate([lo, hi], axis=1) * d).reshape(-1, n)


def encode_tensor(arr, ggml_type):
    """float array in numpy order -> raw bytes of that ggml type."""
    a = np.asarray(arr, dtype=np.float32)
    if ggml_type == F32:
        return a.astype("<f4").tobytes()
    if ggml_type == F16:
        return a.astype("<f2").tobytes()
    if ggml_type == BF16:
        return f32_to_bf16_bits(a).astype("<u2").tobytes()
    if a.shape[-1] % 32:
        raise ValueError(f"{TYPE_NAMES[ggml_type]} needs ne0 % 32 == 0, got {a.shape[-1]}")
    if ggml_type == Q8_0:
        return quantize_q8_0(a).tobytes()
    if ggml_type == Q4_0:
        return quantize_q4_0(a).tobytes()
    raise ValueError(f"unsupported ggml type {ggml_type}")


def decode_tensor(raw, ggml_type, shape):
    """raw uint8 bytes -> float32 array of numpy `shape`."""
    n0 = shape[-1]
    if ggml_type == F32:
        out = raw.view("<f4").astype(np.float32)
    elif ggml_type == F16:
        out = raw.view("<f2").astype(np.float32)
    elif ggml_type == BF16:
        out = bf16_bits_to_f32(raw.view("<u2"))
    elif ggml_type == Q8_0:
        out = dequantize_q8_0(raw, n0)
    elif ggml_type == Q4_0:
        out = dequantize_q4_0(raw, n0)
    else:
        raise ValueError(f"unsupported ggml type {ggml_type}")
    return out.reshape(shape)


def tensor_nbytes(ggml_type, n_elements):
    blk, size = _BLOCK[ggml_type]
    return n_elements // blk * size


# ============================================================ reader

class TensorInfo:
    def __init__(self, name, ne, ggml_type, offset):
        self.name, self.ne, self.type, self.offset = name, ne, ggml_type, offset

    @property
    def shape(self):
        """numpy shape (reverse of ggml ne)."""
        return tuple(reversed(self.ne))

    @property
    def n_elements(self):
        return int(np.prod(self.ne)) if self.ne else 1


class GGUFFile:
    def __init__(self, path):
        self.path = path
        self.data = np.memmap(path, dtype=np.uint8, mode="r")
        self.pos = 0
        if bytes(self.data[0:4]) != GGUF_MAGIC:
            raise ValueError(f"{path}: not a GGUF file")
        self.pos = 4
        self.version = self._scalar(UINT32)
        if self.version not in (2, 3):
            raise ValueError(f"{path}: unsupported GGUF version {self.version}")
        n_tensors = self._scalar(UINT64)
        n_kv = self._scalar(UINT64)
        self.meta, self.meta_types = {}, {}
        for _ in range(n_kv):
            key = self._string()
            vtype = self._scalar(UINT32)
            self.meta[key], self.meta_types[key] = self._value(vtype)
        self.tensors = {}
        for _ in range(n_tensors):
            name = self._string()
            n_dims = self._scalar(UINT32)
            ne = [self._scalar(UINT64) for _ in range(n_dims)]
            ggml_type = self._scalar(UINT32)
            offset = self._scalar(UINT64)
            self.tensors[name] = TensorInfo(name, ne, ggml_type, offset)
        align = int(self.meta.get("general.alignment", DEFAULT_ALIGNMENT))
        self.data_start = (self.pos + align - 1) // align * align

    def _scalar(self, vtype):
        fmt = _SCALAR_FMT[vtype]
        n = struct.calcsize(fmt)
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += n
        return v

    def _string(self):
        n = self._scalar(UINT64)
        s = bytes(self.data[self.pos:self.pos + n]).decode("utf-8", errors="surrogateescape")
        self.pos += n
        return s

    def _value(self, vtype):
        """-> (value, type) where type is vtype or (ARRAY, element type)."""
        if vtype == STRING:
            return self._string(), STRING
        if vtype == ARRAY:
            etype = self._scalar(UINT32)
            count = self._scalar(UINT64)
            if etype in _SCALAR_NP:                                   # numbers: one vectorised read
                dt = np.dtype(_SCALAR_NP[etype]).newbyteorder("<")
                n = count * dt.itemsize
                arr = np.frombuffer(self.data[self.pos:self.pos + n].tobytes(), dtype=dt)
                self.pos += n
                return arr.tolist(), (ARRAY, etype)
            items = [self._value(etype) for _ in range(count)]
            inner = items[0][1] if items else etype                     # nested arrays keep their type
            return [v for v, _ in items], (ARRAY, inner)
        return self._scalar(vtype), vtype

    def raw(self, name):
        info = self.tensors[name]
        start = self.data_start + info.offset
        return self.data[start:start + tensor_nbytes(info.type, info.n_elements)]

    def tensor(self, name):
        """-> float32 numpy array, numpy order."""
        info = self.tensors[name]
        return decode_tensor(np.asarray(self.raw(name)), info.type, info.shape)


# ============================================================ writer

def _pack_scalar(vtype, v):
    return struct.pack(_SCALAR_FMT[vtype], v)


def _pack_string(s):
    b = s.encode("utf-8", errors="surrogateescape")
    return struct.pack("<Q", len(b)) + b


def _pack_value(vtype, v):
    if vtype == STRING:
        return _pack_string(v)
    if isinstance(vtype, tuple):                                       # (ARRAY, element type)
        etype = vtype[1]
        out = [struct.pack("<IQ", ARRAY if isinstance(etype, tuple) else etype, len(v))]
        if etype in _SCALAR_NP:
            out.append(np.asarray(v, dtype=np.dtype(_SCALAR_NP[etype]).newbyteorder("<")).tobytes())
        else:
            out.extend(_pack_value(etype, e) for e in v)
        return b"".join(out)
    return _pack_scalar(vtype, v)


def _guess_type(v):
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, int):
        return UINT32 if v >= 0 else INT32
    if isinstance(v, float):
        return FLOAT32
    if isinstance(v, str):
        return STRING
    if isinstance(v, (list, tuple)):
        return (ARRAY, _guess_type(v[0]) if len(v) else INT32)
    raise TypeError(f"cannot guess GGUF type of {v!r}")


class GGUFWriter:
    """Collects metadata and tensors, then writes a GGUF v3 file in insertion order."""

    def __init__(self, alignment=DEFAULT_ALIGNMENT):
        self.kv = {}          # key -> (type, value); type is a GGUF type or (ARRAY, element type)
        self.tensors = []     # (name, ne, ggml_type, bytes)
        self.alignment = alignment
        if alignment != DEFAULT_ALIGNMENT:
            self.add("general.alignment", alignment, UINT32)

    def add(self, key, value, vtype=None):
        """vtype: a GGUF type, (ARRAY, element type), or None to guess (int -> u32, float -> f32)."""
        self.kv[key] = (vtype if vtype is not None else _guess_type(value), value)

    def add_tensor(self, name, array, ggml_type=F32):
        """array in numpy order (out, in); stored as ggml ne = reversed shape."""
        a = np.asarray(array)
        self.tensors.append((name, list(reversed(a.shape)), ggml_type, encode_tensor(a, ggml_type)))

    def add_raw_tensor(self, name, ne, ggml_type, raw):
        """Copy already-encoded bytes (e.g. from GGUFFile.raw) without re-quantising."""
        self.tensors.append((name, list(ne), ggml_type, bytes(raw)))

    def write(self, path):
        al = self.alignment
        head = [GGUF_MAGIC, struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))]
        for key, (vtype, value) in self.kv.items():
            head.append(_pack_string(key))
            head.append(struct.pack("<I", ARRAY if isinstance(vtype, tuple) else vtype))
            head.append(_pack_value(vtype, value))
        offset = 0
        for name, ne, ggml_type, raw in self.tensors:
            head.append(_pack_string(name))
            head.append(struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne))
            head.append(struct.pack("<IQ", ggml_type, offset))
            offset += (len(raw) + al - 1) // al * al
        header = b"".join(head)
        with open(path, "wb") as f:
            f.write(header)
            f.write(b"\0" * ((-len(header)) % al))
            for _, _, _, raw in self.tensors:
                f.write(raw)
                f.write(b"\0" * ((-len(raw)) % al))
