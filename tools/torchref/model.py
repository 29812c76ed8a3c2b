"""A small, readable PyTorch reference of Clover-35B-A3B (qwen35moe: Gated DeltaNet + gated attention + MoE).

What it runs (CLOVER-SPEC section 2, qwen35moe-gguf.md section 5):
  forward(tokens, state)   AR / commit pass: causal, returns logits for every position and the new state
  denoise(block, state)    denoising pass: attention bidirectional inside the block (+ whole prefix),
                           GDN forward scan from a copy of the state + reverse in-block path (3.3);
                           returns logits for all B positions, never modifies `state`
  commit(block, state)     = forward(block, state)

Weights are a dict {GGUF tensor name: tensor} in the canonical form of layout.py, so the same
functions serve inference (tensors loaded from a GGUF) and training (a dict of nn.Parameters,
see `CloverParams`). Every function is differentiable unless `act_quant` is on.

Shapes: T = tokens in the call, P = committed tokens (n_past), D = n_embd.
"""
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from . import gguf
from .layout import read_gguf


# ============================================================ numerics of llama.cpp's CPU matmuls

def round_activation(x, wtype):
    """Emulate ggml-cpu rounding the matmul input (src1) to the weight's vec_dot_type.

    Q4_0/Q8_0 weights: the activation becomes Q8_0 blocks of 32 along the last axis
    (arch/x86/quants.c quantize_row_q8_0): d = fp16(amax/127), id = 127/amax in fp32,
    q = round-half-even(x*id). F16 / BF16 weights: the activation is rounded to fp16 / bf16.
    ggml holds activations in fp32, so round to fp32 first.
    """
    if wtype == gguf.F32:
        return x
    x32 = x.to(torch.float32)
    if wtype == gguf.F16:
        return x32.to(torch.float16).to(x.dtype)
    if wtype == gguf.BF16:
        return x32.to(torch.bfloat16).to(x.dtype)
    if wtype in (gguf.Q8_0, gguf.Q4_0):
        b = x32.reshape(*x.shape[:-1], x.shape[-1] // 32, 32)          # (..., nb, 32)
        amax = b.abs().amax(dim=-1, keepdim=True)
        d = (amax / 127).to(torch.float16).to(torch.float32)
        inv = torch.where(amax > 0, 127 / amax, torch.zeros_like(amax))
        q = torch.round(b * inv)                                       # half to even
        return (q * d).reshape(x.shape).to(x.dtype)
    raise ValueError(f"no activation rounding rule for ggml type {wtype}")


# ============================================================ the cache state

@dataclass
class State:
    """What the committed tokens leave behind (CLOVER-SPEC 2: one cache for AR, diffusion, verify).

    k[il], v[il]: (P, n_head_kv * head_dim) per attention layer; K after q/k-norm and RoPE
    conv[il]:     (K-1, gdn_channels) per GDN layer: the last K-1 pre-conv inputs, oldest first
    ssm[il]:      (H_v, d_k, d_v) per GDN layer: S_h[i][j] of the delta rule
    """
    n_past: int = 0
    k: dict = field(default_factory=dict)
    v: dict = field(default_factory=dict)
    conv: dict = field(default_factory=dict)
    ssm: dict = field(default_factory=dict)

    def clone(self):
        c = lambda d: {i: t.clone() for i, t in d.items()}
        return State(self.n_past, c(self.k), c(self.v), c(self.conv), c(self.ssm))


def empty_state(cfg, dtype=torch.float64):
    s = State()
    for il in range(cfg.n_layer):
        if cfg.recurrent[il]:
            s.conv[il] = torch.zeros(cfg.conv_kernel - 1, cfg.gdn_channels, dtype=dtype)
            s.ssm[il] = torch.zeros(cfg.gdn_v_heads, cfg.gdn_k_dim, cfg.gdn_v_dim, dtype=dtype)
        else:
            s.k[il] = torch.zeros(0, cfg.n_head_kv * cfg.head_dim, dtype=dtype)
            s.v[il] = torch.zeros(0, cfg.n_head_kv * cfg.head_dim, dtype=dtype)
    return s


# ============================================================ building blocks

def rms_norm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w


def l2_norm(x, eps):
    """ggml: rms_norm(x, eps/n) / sqrt(n) == x / sqrt(sum(x^2) + eps)."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def rope(x, pos, cfg):
    """IMROPE as llama.cpp runs it for text (positions (p, p, p, 0)): NEOX pairs (i, i + n_rot/2)
    over the first n_rot dims; a pair whose section is the 4th one gets position 0.
    x: (T, H, hd), pos: (T,) -> (T, H, hd)"""
    half = cfg.n_rot // 2
    i = torch.arange(half, dtype=torch.float64)
    inv_freq = cfg.rope_base ** (-2.0 * i / cfg.n_rot)                 # (half,)
    s = cfg.rope_sections
    if s and sum(s) > 0:
        sector = torch.arange(half) % sum(s)
        uses_pos = (((sector % 3 == 0) & (sector < 3 * s[0])) | ((sector % 3 == 1) & (sector < 3 * s[1]))
                    | ((sector % 3 == 2) & (sector < 3 * s[2])))
    else:
        uses_pos = torch.ones(half, dtype=torch.bool)
    theta = pos.to(torch.float64)[:, None] * (inv_freq * uses_pos)[None, :]   # (T, half)
    cos, sin = theta.cos().to(x.dtype)[:, None, :], theta.sin().to(x.dtype)[:, None, :]
    x0, x1, rest = x[..., :half], x[..., half:cfg.n_rot], x[..., cfg.n_rot:]
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos, rest], dim=-1)


# ============================================================ the model

class CloverRef:
    """Weights + numerics. `w`: {name: tensor (out, in)}, canonical (layout.py);
    `wtype`: {name: ggml type}, used only when act_quant is on."""

    def __init__(self, cfg, weights, wtypes=None, act_quant=False, dtype=None):
        self.cfg, self.w = cfg, weights
        self.dtype = dtype or weights["token_embd.weight"].dtype       # of the state and activations
        self.wtype = wtypes or {}
        self.act_quant = act_quant
        self.layout = None                                              # set by from_gguf
        self.has_reverse = all(f"blk.{il}.{n}" in weights for il in range(cfg.n_layer)
                               if cfg.recurrent[il] for n in ("ssm_rev_alpha.weight", "ssm_rev_beta.weight",
                                                               "ssm_rev_dt.bias", "ssm_rev_a"))

    @classmethod
    def from_gguf(cls, path, dtype=torch.float64, act_quant=False):
        cfg, layout, w, types = read_gguf(path)
        m = cls(cfg, {n: torch.from_numpy(a).to(dtype) for n, a in w.items()}, types, act_quant, dtype)
        m.layout = layout
        return m

    def linear(self, x, name, expert=None):
        """y = W x over the last axis; W: (out, in) or slice `expert` of (E, out, in)."""
        w = self.w[name] if expert is None else self.w[name][expert]
        if self.act_quant:
            x = round_activation(x, self.wtype.get(name, gguf.F32))
        return x @ w.transpose(-1, -2)

    def empty_state(self):
        return empty_state(self.cfg, self.dtype)

    # ---------------------------------------------------------------- passes

    def forward(self, tokens, state=None):
        """AR (causal) pass. tokens: list/LongTensor (T,). -> logits (T, n_vocab), new State."""
        state = self.empty_state() if state is None else state
        return self._run(tokens, state, denoise=False)

    def commit(self, block, state):
        """Commit pass over [p, d1..d(B-1)]: the AR pass; writes the block into the (new) state."""
        return self.forward(block, state)

    def denoise(self, block, state, use_reverse=True, bidirectional=True):
        """Denoising pass over [p, t1..t(B-1)] (mask ids where undecided) -> logits (B, n_vocab).

        `state` is not modified. use_reverse: add the reverse GDN path (3.3); a file without it must
        pass use_reverse=False explicitly. bidirectional=False only exists for tests.
        """
        if use_reverse and not self.has_reverse:
            raise ValueError("this model has no ssm_rev_* tensors (not the official layout): "
                             "denoise with use_reverse=False to run without the reverse GDN path")
        logits, _ = self._run(block, state, denoise=True, use_reverse=use_reverse,
                              bidirectional=bidirectional)
        return logits

    def _run(self, tokens, state, denoise, use_reverse=False, bidirectional=False):
        cfg = self.cfg
        tokens = torch.as_tensor(tokens, dtype=torch.long)
        T = tokens.shape[0]
        pos = state.n_past + torch.arange(T)                          # RoPE position n_past + i
        new = State(state.n_past + T)
        x = self.w["token_embd.weight"][tokens]                        # (T, D), get_rows: no rounding
        for il in range(cfg.n_layer):
            p = f"blk.{il}."
            h = rms_norm(x, self.w[p + "attn_norm.weight"], cfg.eps)
            if cfg.recurrent[il]:
                y, new.conv[il], new.ssm[il] = gdn_layer(self, il, h, state.conv[il], state.ssm[il],
                                                         reverse=denoise and use_reverse)
            else:
                y, new.k[il], new.v[il] = attention_layer(self, il, h, state.k[il], state.v[il], pos,
                                                          causal=not (denoise and bidirectional))
            x = x + y
            h2 = rms_norm(x, self.w[p + "post_attention_norm.weight"], cfg.eps)
            x = x + moe_layer(self, il, h2)
        x = rms_norm(x, self.w["output_norm.weight"], cfg.eps)
        out_name = "output.weight" if "output.weight" in self.w else "token_embd.weight"
        logits = self.linear(x, out_name)                              # (T, n_vocab)
        return logits, (None if denoise else new)


# ============================================================ layers

def attention_layer(m, il, h, k_past, v_past, pos, causal=True):
    """Gated full attention. h: (T, D); k_past, v_past: (P, n_kv*hd); pos: (T,).
    -> y (T, D), k (P+T, n_kv*hd), v (P+T, n_kv*hd)"""
    cfg, p = m.cfg, f"blk.{il}."
    T, P, hd, H, Hkv = h.shape[0], k_past.shape[0], cfg.head_dim, cfg.n_head, cfg.n_head_kv
    qg = m.linear(h, p + "attn_q.weight").view(T, H, 2 * hd)           # per head [query | gate]
    q, gate = qg[..., :hd], qg[..., hd:]                               # (T, H, hd) each
    k = m.linear(h, p + "attn_k.weight").view(T, Hkv, hd)
    v = m.linear(h, p + "attn_v.weight").view(T, Hkv, hd)
    q = rope(rms_norm(q, m.w[p + "attn_q_norm.weight"], cfg.eps), pos, cfg)
    k = rope(rms_norm(k, m.w[p + "attn_k_norm.weight"], cfg.eps), pos, cfg)
    k_all = torch.cat([k_past, k.reshape(T, Hkv * hd)])                # (P+T, Hkv*hd)
    v_all = torch.cat([v_past, v.reshape(T, Hkv * hd)])
    # GQA: query head h reads kv head h // (H / Hkv)
    kh = k_all.view(P + T, Hkv, hd).transpose(0, 1).repeat_interleave(H // Hkv, dim=0)  # (H, P+T, hd)
    vh = v_all.view(P + T, Hkv, hd).transpose(0, 1).repeat_interleave(H // Hkv, dim=0)
    scores = q.transpose(0, 1) @ kh.transpose(1, 2) / math.sqrt(hd)   # (H, T, P+T)
    if causal:                                                         # block row i sees prefix + block 0..i
        future = torch.arange(P + T)[None, :] > (P + torch.arange(T))[:, None]
        scores = scores.masked_fill(future, float("-inf"))
    o = (torch.softmax(scores, dim=-1) @ vh).transpose(0, 1)           # (T, H, hd)
    o = o * torch.sigmoid(gate)                                        # output gate
    y = m.linear(o.reshape(T, H * hd), p + "attn_output.weight")       # (T, D)
    return y, k_all, v_all


def gdn_layer(m, il, h, conv_state, ssm_state, reverse=False):
    """Gated DeltaNet. h: (T, D); conv_state: (K-1, C); ssm_state: (H_v, d_k, d_v).
    reverse: add the reverse in-block path (denoising passes only, CLOVER-SPEC 3.3).
    -> y (T, D), new conv state (K-1, C), new ssm state (H_v, d_k, d_v)"""
    cfg, p = m.cfg, f"blk.{il}."
    T, Hk, Hv, dk, dv, K = h.shape[0], cfg.gdn_k_heads, cfg.gdn_v_heads, cfg.gdn_k_dim, cfg.gdn_v_dim, cfg.conv_kernel
    mixed = m.linear(h, p + "attn_qkv.weight")                         # (T, C) pre-conv q|k|v
    z = m.linear(h, p + "attn_gate.weight").view(T, Hv, dv)            # output gate
    beta = torch.sigmoid(m.linear(h, p + "ssm_beta.weight"))           # (T, Hv)
    g = F.softplus(m.linear(h, p + "ssm_alpha.weight") + m.w[p + "ssm_dt.bias"]) * m.w[p + "ssm_a"]  # (T, Hv) < 0

    # causal depthwise conv over time, continuing from the last K-1 inputs
    xc = torch.cat([conv_state, mixed])                                # (K-1+T, C)
    windows = xc.unfold(0, K, 1)                                       # (T, C, K), tap 0 oldest
    c = F.silu((windows * m.w[p + "ssm_conv1d.weight"]).sum(dim=-1))   # (T, C)
    new_conv = xc[T:]                                                  # (K-1, C)

    q = l2_norm(c[:, :Hk * dk].view(T, Hk, dk), cfg.eps)
    k = l2_norm(c[:, Hk * dk:2 * Hk * dk].view(T, Hk, dk), cfg.eps)
    v = c[:, 2 * Hk * dk:].view(T, Hv, dv)
    tiled = torch.arange(Hv) % Hk                                      # value head h uses key head h mod H_k
    q, k = q[:, tiled], k[:, tiled]                                    # (T, Hv, dk)

    o, S = delta_rule_scan(q, k, v, g, beta, ssm_state)               # (T, Hv, dv), (Hv, dk, dv)
    if reverse:
        beta_r = torch.sigmoid(m.linear(h, p + "ssm_rev_beta.weight"))
        g_r = F.softplus(m.linear(h, p + "ssm_rev_alpha.weight") + m.w[p + "ssm_rev_dt.bias"]) * m.w[p + "ssm_rev_a"]
        o = o + reverse_in_block(q, k, v, g_r, beta_r)

    o = rms_norm(o, m.w[p + "ssm_norm.weight"], cfg.eps) * F.silu(z)  # gated RMSNorm per head
    y = m.linear(o.reshape(T, Hv * dv), p + "ssm_out.weight")          # (T, D)
    return y, new_conv, S


def delta_rule_scan(q, k, v, g, beta, S):
    """Forward gated delta rule. q, k: (T, Hv, dk); v: (T, Hv, dv); g, beta: (T, Hv); S: (Hv, dk, dv).
    Per step: S = exp(g) S;  S += k (x) ((v - S^T k) * beta);  o = S^T q / sqrt(dk)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    outs = []
    for t in range(q.shape[0]):
        S = torch.exp(g[t])[:, None, None] * S
        delta = (v[t] - torch.einsum("hij,hi->hj", S, k[t])) * beta[t][:, None]   # (Hv, dv)
        S = S + k[t][:, :, None] * delta[:, None, :]
        outs.append(scale * torch.einsum("hij,hi->hj", S, q[t]))
    return torch.stack(outs), S


def reverse_in_block(q, k, v, g, beta):
    """DECISION (CLOVER-SPEC 3.3): the reverse in-block path. Same q, k, v as the forward scan; its
    own g', beta'. Runs t = B-1 .. 0 from R = 0; position t reads R before adding itself, so only
    positions > t contribute. -> o_rev (T, Hv, dv)"""
    scale = 1.0 / math.sqrt(q.shape[-1])
    T, Hv, dk = k.shape
    R = torch.zeros(Hv, dk, v.shape[-1], dtype=v.dtype)
    outs = [None] * T
    for t in range(T - 1, -1, -1):
        outs[t] = scale * torch.einsum("hij,hi->hj", R, q[t])
        R = torch.exp(g[t])[:, None, None] * R
        delta = (v[t] - torch.einsum("hij,hi->hj", R, k[t])) * beta[t][:, None]
        R = R + k[t][:, :, None] * delta[:, None, :]
    return torch.stack(outs)


def moe_layer(m, il, h):
    """Softmax router -> top-k -> renormalised weights; SwiGLU experts; sigmoid-gated shared expert.
    h: (T, D) -> (T, D)"""
    cfg, p = m.cfg, f"blk.{il}."
    probs = torch.softmax(m.linear(h, p + "ffn_gate_inp.weight"), dim=-1)      # (T, E), over all experts
    top_p, top_e = torch.topk(probs, cfg.n_expert_used, dim=-1)                # (T, k)
    top_w = top_p / top_p.sum(dim=-1, keepdim=True).clamp(min=6.103515625e-5)
    out = torch.zeros_like(h)
    for e in torch.unique(top_e).tolist():
        rows, slot = torch.nonzero(top_e == e, as_tuple=True)                  # tokens routed to e
        x = h[rows]
        f = m.linear(F.silu(m.linear(x, p + "ffn_gate_exps.weight", e)) * m.linear(x, p + "ffn_up_exps.weight", e),
                     p + "ffn_down_exps.weight", e)                            # (n, D)
        out = out.index_add(0, rows, f * top_w[rows, slot][:, None])
    shared = m.linear(F.silu(m.linear(h, p + "ffn_gate_shexp.weight")) * m.linear(h, p + "ffn_up_shexp.weight"),
                      p + "ffn_down_shexp.weight")
    gamma = torch.sigmoid(m.linear(h, p + "ffn_gate_inp_shexp.weight"))       # (T, 1)
    return out + gamma * shared


# ============================================================ training helper

class CloverParams(torch.nn.Module):
    """The weights dict as trainable parameters: `CloverRef(cfg, params.as_dict())` runs the same
    reference with gradients. GGUF names contain dots, which ParameterDict keys may not."""

    def __init__(self, weights):
        super().__init__()
        self.params = torch.nn.ParameterDict(
            {n.replace(".", "__"): torch.nn.Parameter(t.clone()) for n, t in weights.items()})

    def as_dict(self):
        return {n.replace("__", "."): t for n, t in self.params.items()}
