"""The model's hyperparameters and the three GGUF layouts (CLOVER-SPEC 3.1), both directions.

Inside the reference every layout becomes one canonical form (llama.cpp's qwen35moe form):
  - numpy/torch order, a matrix is (out, in) and computes y = W x;
  - `blk.N.ssm_a` and `blk.N.ssm_rev_a` hold -exp(A_log) (< 0);
  - fused `attn_qkv` (attention layers) and `ffn_gate_up_exps` are split into their parts;
  - `ffn_gate_inp_shexp.weight` is (1, n_embd); `ssm_conv1d.weight` is (channels, K), tap 0 oldest;
  - norm weights as stored (the +1 of the Qwen RMSNorm already baked in, ssm_norm not shifted).
`write_gguf` turns canonical weights back into any of the three layouts.
"""
import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import gguf

OFFICIAL, LLAMA_CLOVER, QWEN35MOE = "official", "llama_clover", "qwen35moe"
LAYOUTS = (OFFICIAL, LLAMA_CLOVER, QWEN35MOE)
REVERSE_TENSORS = ("ssm_rev_alpha.weight", "ssm_rev_beta.weight", "ssm_rev_dt.bias", "ssm_rev_a")


@dataclass
class Config:
    n_layer: int                    # main layers (block_count - nextn_predict_layers)
    n_embd: int
    n_vocab: int
    recurrent: list                 # per layer: True = GDN, False = gated attention
    # attention
    n_head: int
    n_head_kv: int
    head_dim: int
    n_rot: int
    rope_base: float
    rope_sections: list             # IMROPE sections, e.g. [11, 11, 10, 0]
    # Gated DeltaNet
    gdn_k_heads: int                # H_k
    gdn_v_heads: int                # H_v
    gdn_k_dim: int                  # d_k (ssm.state_size)
    gdn_v_dim: int                  # d_v (ssm.inner_size / H_v)
    conv_kernel: int                # K
    # MoE
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    n_ff_shexp: int
    eps: float = 1e-6
    n_ctx_train: int = 262144
    # diffusion (official file; DECISION names in CLOVER-SPEC 3.2)
    block_size: int = 32
    threshold: float = 0.95
    mask_token_id: int = -1
    extra: dict = field(default_factory=dict)   # other metadata to keep on export (tokenizer, ...)

    @property
    def gdn_channels(self):         # conv channels = q, k, v of the GDN layer
        return 2 * self.gdn_k_heads * self.gdn_k_dim + self.gdn_v_heads * self.gdn_v_dim


# ============================================================ reading

def detect_layout(f):
    arch = f.meta["general.architecture"]
    has_rev = any(".ssm_rev_" in n for n in f.tensors)
    if arch == "qwen35moe":
        return QWEN35MOE
    if arch != "clover_moe":
        raise ValueError(f"unsupported architecture {arch!r}")
    if has_rev and f"{arch}.expert_shared_count" not in f.meta:
        return OFFICIAL
    if not has_rev and f"{arch}.expert_shared_count" in f.meta:
        return LLAMA_CLOVER
    raise ValueError("clover_moe file is neither layout: expected ssm_rev_* tensors without "
                     "expert_shared_count (official) or expert_shared_count without ssm_rev_* (llama.cpp)")


def _scalar_or_first(v):
    return v[0] if isinstance(v, list) else v


def read_config(f):
    a = f.meta["general.architecture"]
    m = lambda k, d=None: f.meta.get(f"{a}.{k}", d)
    n_layer = int(m("block_count")) - int(m("nextn_predict_layers", 0))
    if m("attention.recurrent_layers") is not None:
        recurrent = [bool(x) for x in m("attention.recurrent_layers")[:n_layer]]
    else:
        interval = int(m("full_attention_interval", 4))
        recurrent = [(i + 1) % interval != 0 for i in range(n_layer)]
    n_head = int(_scalar_or_first(m("attention.head_count")))
    head_dim = int(m("attention.key_length", int(m("embedding_length")) // n_head))
    h_v = int(m("ssm.time_step_rank"))
    emb = f.tensors["token_embd.weight"]
    return Config(
        n_layer=n_layer, n_embd=int(m("embedding_length")), n_vocab=int(emb.ne[1]),
        recurrent=recurrent,
        n_head=n_head, n_head_kv=int(_scalar_or_first(m("attention.head_count_kv", n_head))),
        head_dim=head_dim, n_rot=int(m("rope.dimension_count", head_dim)),
        rope_base=float(m("rope.freq_base", 10000.0)),
        rope_sections=list(m("rope.dimension_sections", [])),
        gdn_k_heads=int(m("ssm.group_count")), gdn_v_heads=h_v, gdn_k_dim=int(m("ssm.state_size")),
        gdn_v_dim=int(m("ssm.inner_size")) // h_v, conv_kernel=int(m("ssm.conv_kernel")),
        n_expert=int(m("expert_count")), n_expert_used=int(_scalar_or_first(m("expert_used_count"))),
        n_ff_exp=int(_scalar_or_first(m("expert_feed_forward_length"))),
        n_ff_shexp=int(m("expert_shared_feed_forward_length")),
        eps=float(m("attention.layer_norm_rms_epsilon")),
        n_ctx_train=int(m("context_length", 262144)),
        block_size=int(m("diffusion.block_size", 32)), threshold=float(m("diffusion.threshold", 0.95)),
        mask_token_id=int(m("diffusion.mask_token_id", -1)),
        extra={k: (f.meta_types[k], v) for k, v in f.meta.items()
               if k.startswith("tokenizer.") or k == "general.name"},
    )


def read_gguf(path):
    """-> (Config, layout, weights {name: float32 numpy, canonical}, types {name: ggml type})."""
    f = gguf.GGUFFile(path)
    layout = detect_layout(f)
    cfg = read_config(f)
    weights, types = {}, {}
    for name, info in f.tensors.items():
        if name.startswith("blk.") and int(name.split(".")[1]) >= cfg.n_layer:
            continue                                                    # MTP block: never run
        weights[name], types[name] = f.tensor(name), info.type
    _split_fused(cfg, weights, types)
    for il in range(cfg.n_layer):
        p = f"blk.{il}."
        if p + "ffn_gate_inp_shexp.weight" in weights:
            weights[p + "ffn_gate_inp_shexp.weight"] = weights[p + "ffn_gate_inp_shexp.weight"].reshape(1, -1)
        if not cfg.recurrent[il]:
            continue
        for a_name in ("ssm_a", "ssm_rev_a"):
            if p + a_name not in weights:
                continue
            a = weights[p + a_name].astype(np.float64)
            if layout == OFFICIAL:                                      # DECISION (CLOVER-SPEC 3.2.3)
                if np.all(a < 0):
                    warnings.warn(f"{p}{a_name}: every value < 0 in an official file, where it "
                                  "should hold A_log; converting anyway")
                a = -np.exp(a)
            elif np.any(a >= 0):
                warnings.warn(f"{p}{a_name}: values >= 0 in a {layout} file (expected -exp(A_log) < 0)")
            weights[p + a_name] = a.astype(np.float32)
    return cfg, layout, weights, types


def _split_fused(cfg, w, t):
    qd, kd = 2 * cfg.n_head * cfg.head_dim, cfg.n_head_kv * cfg.head_dim
    for il in range(cfg.n_layer):
        p = f"blk.{il}."
        if not cfg.recurrent[il] and p + "attn_qkv.weight" in w:       # fused q|k|v rows
            qkv, ty = w.pop(p + "attn_qkv.weight"), t.pop(p + "attn_qkv.weight")
            for name, part in zip(("attn_q", "attn_k", "attn_v"), np.split(qkv, [qd, qd + kd], axis=0)):
                w[p + name + ".weight"], t[p + name + ".weight"] = part, ty
        if p + "ffn_gate_up_exps.weight" in w:                          # (E, 2*n_ff, n_embd), gate first
            gu, ty = w.pop(p + "ffn_gate_up_exps.weight"), t.pop(p + "ffn_gate_up_exps.weight")
            w[p + "ffn_gate_exps.weight"], w[p + "ffn_up_exps.weight"] = np.split(gu, 2, axis=1)
            t[p + "ffn_gate_exps.weight"] = t[p + "ffn_up_exps.weight"] = ty


# ============================================================ writing

# Tensors the converter and llama.cpp keep in F32 whatever the file type (qwen35moe-gguf.md 3).
def must_be_f32(name, shape):
    return (len(shape) == 1 or name.endswith("norm.weight") or "ssm_conv1d" in name
            or "ffn_gate_inp" in name or not name.endswith(".weight"))


def tensor_order(cfg, names):
    """Global tensors first, then by layer, each in a stable order."""
    def key(n):
        if n.startswith("blk."):
            return (1, int(n.split(".")[1]), n)
        return (0 if n == "token_embd.weight" else 2, 0, n)
    return sorted(names, key=key)


def metadata(cfg, layout, file_type=0):
    """-> {key: (gguf type, value)} for the given layout."""
    a = "qwen35moe" if layout == QWEN35MOE else "clover_moe"
    U, F, I = gguf.UINT32, gguf.FLOAT32, gguf.INT32
    kv = {
        "general.architecture": (gguf.STRING, a),
        "general.file_type": (U, file_type),
        f"{a}.context_length": (U, cfg.n_ctx_train),
        f"{a}.embedding_length": (U, cfg.n_embd),
        f"{a}.block_count": (U, cfg.n_layer),
        f"{a}.expert_count": (U, cfg.n_expert),
        f"{a}.expert_used_count": (U, cfg.n_expert_used),
        f"{a}.attention.head_count": (U, cfg.n_head),
        f"{a}.attention.head_count_kv": (U, cfg.n_head_kv),
        f"{a}.attention.key_length": (U, cfg.head_dim),
        f"{a}.attention.value_length": (U, cfg.head_dim),
        f"{a}.rope.dimension_count": (U, cfg.n_rot),
        f"{a}.rope.freq_base": (F, cfg.rope_base),
        f"{a}.rope.dimension_sections": ((gguf.ARRAY, I), list(cfg.rope_sections or [cfg.n_rot // 2, 0, 0, 0])),
        f"{a}.attention.layer_norm_rms_epsilon": (F, cfg.eps),
        f"{a}.expert_feed_forward_length": (U, cfg.n_ff_exp),
        f"{a}.expert_shared_feed_forward_length": (U, cfg.n_ff_shexp),
        f"{a}.ssm.conv_kernel": (U, cfg.conv_kernel),
        f"{a}.ssm.inner_size": (U, cfg.gdn_v_heads * cfg.gdn_v_dim),
        f"{a}.ssm.state_size": (U, cfg.gdn_k_dim),
        f"{a}.ssm.time_step_rank": (U, cfg.gdn_v_heads),
        f"{a}.ssm.group_count": (U, cfg.gdn_k_heads),
        f"{a}.attention.recurrent_layers": ((gguf.ARRAY, gguf.BOOL), [bool(r) for r in cfg.recurrent]),
    }
    for n in range(1, cfg.n_layer + 1):                                # only when the pattern has one
        if all(r == ((i + 1) % n != 0) for i, r in enumerate(cfg.recurrent)):
            kv[f"{a}.full_attention_interval"] = (U, n)
            break
    if layout == LLAMA_CLOVER:
        kv[f"{a}.expert_shared_count"] = (U, 1)
    if layout == OFFICIAL:
        kv[f"{a}.diffusion.block_size"] = (U, cfg.block_size)
        kv[f"{a}.diffusion.threshold"] = (F, cfg.threshold)
        if cfg.mask_token_id >= 0:
            kv[f"{a}.diffusion.mask_token_id"] = (U, cfg.mask_token_id)
    kv.update(cfg.extra)
    return kv


def write_gguf(path, cfg, weights, layout=OFFICIAL, wtype=gguf.F32, types=None):
    """Write canonical weights (numpy or torch, float) as a GGUF file in `layout`.

    wtype: ggml type for every matrix the format lets choose (F32, F16, BF16, Q8_0, Q4_0);
    types: optional {name: ggml type} overrides. Tensors llama.cpp needs in F32 stay F32, and a
    quantised type falls back to F16 where ne0 is not a multiple of 32.
    The official layout stores A_log in ssm_a / ssm_rev_a and keeps the ssm_rev_* tensors; the other
    two drop them (a warning says so if they were present).
    """
    types = types or {}
    w = {n: np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v, dtype=np.float64)
         for n, v in weights.items()}
    has_rev = any(".ssm_rev_" in n for n in w)
    if layout == OFFICIAL and not has_rev:
        raise ValueError("the official layout needs the ssm_rev_* tensors")
    if layout != OFFICIAL and has_rev:
        warnings.warn(f"{layout} layout: dropping the ssm_rev_* tensors (the reverse GDN path)")
        w = {n: v for n, v in w.items() if ".ssm_rev_" not in n}
    if layout == OFFICIAL:
        for n in list(w):
            if n.endswith(".ssm_a") or n.endswith(".ssm_rev_a"):
                w[n] = np.log(-w[n])                                    # -exp(A_log) -> A_log
    for n in list(w):
        if n.endswith("ffn_gate_inp_shexp.weight"):
            w[n] = w[n].reshape(-1)                                     # {n_embd}
    out = gguf.GGUFWriter()
    main_type = wtype
    for key, (vt, v) in metadata(cfg, layout, _file_type(main_type)).items():
        out.add(key, v, vt)
    for n in tensor_order(cfg, w):
        a = w[n]
        t = types.get(n, gguf.F32 if must_be_f32(n, a.shape) else wtype)
        if t in (gguf.Q8_0, gguf.Q4_0) and a.shape[-1] % 32:
            t = gguf.F16
        out.add_tensor(n, a.astype(np.float32), t)
    out.write(path)


def _file_type(t):
    return {gguf.F32: 0, gguf.F16: 1, gguf.Q4_0: 2, gguf.Q8_0: 7, gguf.BF16: 32}[t]


def inverse_softplus(y):
    return math.log(math.expm1(y))


def convert_layout(src, dst, layout):
    """Rewrite a GGUF file in another layout without touching the other tensors' bytes (the
    official -> llama.cpp patch of CLOVER-SPEC 3.2, and back): architecture name and key prefix,
    `expert_shared_count`, the ssm_rev_* tensors (dropped, or required for the official layout),
    and `ssm_a` / `ssm_rev_a` between A_log and -exp(A_log)."""
    f = gguf.GGUFFile(src)
    old = detect_layout(f)
    a_old, a_new = f.meta["general.architecture"], ("qwen35moe" if layout == QWEN35MOE else "clover_moe")
    if layout == OFFICIAL and not any(".ssm_rev_" in n for n in f.tensors):
        raise ValueError(f"{src}: no ssm_rev_* tensors, cannot write the official layout")
    out = gguf.GGUFWriter(int(f.meta.get("general.alignment", gguf.DEFAULT_ALIGNMENT)))
    for key, value in f.meta.items():
        vtype = f.meta_types[key]
        if key.startswith(a_old + "."):
            key = a_new + key[len(a_old):]
        if key == f"{a_new}.expert_shared_count":
            continue
        out.add(key, a_new if key == "general.architecture" else value, vtype)
    if layout == LLAMA_CLOVER:
        out.add(f"{a_new}.expert_shared_count", 1, gguf.UINT32)
    for name, info in f.tensors.items():
        if ".ssm_rev_" in name and layout != OFFICIAL:
            continue
        if (name.endswith(".ssm_a") or name.endswith(".ssm_rev_a")) and (old == OFFICIAL) != (layout == OFFICIAL):
            a = f.tensor(name).astype(np.float64)
            out.add_tensor(name, (-np.exp(a) if old == OFFICIAL else np.log(-a)).astype(np.float32), gguf.F32)
        else:
            out.add_raw_tensor(name, info.ne, info.type, f.raw(name))
    out.write(dst)
