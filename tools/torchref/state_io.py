"""Cache state dumps (what `cli.py commit-state` writes), so the C++ engine can be compared with them.

Two containers, same tensors (float32, numpy shapes = row-major, last index fastest):
  STATE.gguf  a GGUF v3 file (readable with the engine's own GGUF reader); ggml ne = reversed shape
  STATE.npz   numpy's zip of .npy arrays
Contents:
  clover_state.n_past  (u32 metadata in GGUF; 0-d int array "n_past" in npz)
  blk.N.k, blk.N.v     (n_past, n_head_kv * head_dim) per attention layer N; K after q/k-norm and RoPE
                       (absent when n_past == 0)
  blk.N.conv           (K-1, gdn_channels) per GDN layer N: the last K-1 pre-conv q|k|v inputs, oldest first
  blk.N.ssm            (H_v, d_v, d_k) per GDN layer N: ssm[h][j][i] = S_h[i][j], the delta-rule state
                       stored transposed, as llama.cpp and src/backend/cpu/sequence.h keep it
"""
import numpy as np
import torch

from . import gguf
from .model import State


def state_arrays(state):
    out = {}
    for il, t in state.k.items():
        if t.shape[0]:
            out[f"blk.{il}.k"] = t
            out[f"blk.{il}.v"] = state.v[il]
    for il, t in state.conv.items():
        out[f"blk.{il}.conv"] = t
        out[f"blk.{il}.ssm"] = state.ssm[il].transpose(1, 2)           # (H_v, d_k, d_v) -> (H_v, d_v, d_k)
    return {n: np.ascontiguousarray(t.detach().to(torch.float32).numpy()) for n, t in out.items()}


def save_state(path, cfg, state):
    arrays = state_arrays(state)
    if path.endswith(".npz"):
        np.savez(path, n_past=np.array(state.n_past), **arrays)
        return
    w = gguf.GGUFWriter()
    w.add("general.architecture", "clover_state", gguf.STRING)
    w.add("clover_state.n_past", state.n_past, gguf.UINT32)
    w.add("clover_state.n_layer", cfg.n_layer, gguf.UINT32)
    for n, a in arrays.items():
        w.add_tensor(n, a, gguf.F32)
    w.write(path)


def load_state(path, cfg, dtype=torch.float64):
    """Inverse of save_state -> model.State."""
    if path.endswith(".npz"):
        z = np.load(path)
        n_past, get = int(z["n_past"]), (lambda n: z[n] if n in z.files else None)
    else:
        f = gguf.GGUFFile(path)
        n_past, get = int(f.meta["clover_state.n_past"]), (lambda n: f.tensor(n) if n in f.tensors else None)
    s = State(n_past)
    t = lambda a: torch.from_numpy(np.array(a)).to(dtype)
    for il in range(cfg.n_layer):
        if cfg.recurrent[il]:
            s.conv[il] = t(get(f"blk.{il}.conv"))
            s.ssm[il] = t(get(f"blk.{il}.ssm")).transpose(1, 2).contiguous()
        else:
            width = cfg.n_head_kv * cfg.head_dim
            k, v = get(f"blk.{il}.k"), get(f"blk.{il}.v")
            s.k[il] = t(k) if k is not None else torch.zeros(0, width, dtype=dtype)
            s.v[il] = t(v) if v is not None else torch.zeros(0, width, dtype=dtype)
    return s
