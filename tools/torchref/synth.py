"""Tiny random Clover/qwen35moe models for tests (any layout, any weight type), written with gguf.py.

    /usr/bin/python3 -m tools.torchref.synth OUT.gguf [--layout official|llama_clover|qwen35moe]
        [--type f32|f16|bf16|q8_0|q4_0] [--seed N] [--pattern LLLF]

Weights: N(0, 1/fan_in) matrices, N(0, 1) embeddings, norms 1 + 0.1 N(0, 1), ssm_a = -U(1, 16),
ssm_dt.bias = inverse softplus of dt in [1e-3, 1e-1]; the reverse path alike. Each tensor has its
own generator seeded from (seed, name). The vocabulary is the 256 GPT-2 byte tokens, padding and
four special tokens (`<|endoftext|>`, `<|im_start|>`, `<|im_end|>`, `<|mask|>` = mask token), enough
for llama.cpp to load the file (tokenizer gpt2 / pre-tokenizer qwen35).
"""
import argparse
import math
import zlib

import numpy as np

from . import gguf
from .layout import Config, LAYOUTS, OFFICIAL, write_gguf

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]


def tiny_config(pattern="LLLF", n_embd=64, n_vocab=320, **kw):
    """Small shapes that still exercise everything: GQA, H_v != H_k (tiled heads), partial RoPE,
    top-k routing with a shared expert. pattern: L = GDN layer, F = full attention."""
    c = dict(n_layer=len(pattern), n_embd=n_embd, n_vocab=n_vocab, recurrent=[ch == "L" for ch in pattern],
             n_head=4, n_head_kv=2, head_dim=32, n_rot=16, rope_base=1e7, rope_sections=[3, 3, 2, 0],
             gdn_k_heads=2, gdn_v_heads=4, gdn_k_dim=32, gdn_v_dim=32, conv_kernel=4,
             n_expert=8, n_expert_used=2, n_ff_exp=32, n_ff_shexp=64, eps=1e-6, n_ctx_train=4096,
             block_size=8, threshold=0.95, mask_token_id=n_vocab - 1)
    c.update(kw)
    cfg = Config(**c)
    cfg.extra = tokenizer_metadata(cfg.n_vocab)
    return cfg


def _bytes_to_unicode():
    """GPT-2's byte -> printable character map (byte-level BPE alphabet)."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tokenizer_metadata(n_vocab):
    byte_tok = _bytes_to_unicode()
    tokens = [byte_tok[b] for b in range(256)]
    merges = ["Ġ t", "h e", "Ġt he", "i n", "e r"]
    tokens += ["Ġt", "he", "Ġthe", "in", "er"]
    n_pad = n_vocab - len(tokens) - len(SPECIALS)
    assert n_pad >= 0, "vocabulary too small"
    tokens += [f"[PAD{i}]" for i in range(n_pad)] + SPECIALS
    types = [1] * (n_vocab - len(SPECIALS)) + [3] * len(SPECIALS)
    A = (gguf.ARRAY, gguf.STRING)
    return {
        "tokenizer.ggml.model": (gguf.STRING, "gpt2"),
        "tokenizer.ggml.pre": (gguf.STRING, "qwen35"),
        "tokenizer.ggml.tokens": (A, tokens),
        "tokenizer.ggml.token_type": ((gguf.ARRAY, gguf.INT32), types),
        "tokenizer.ggml.merges": (A, merges),
        "tokenizer.ggml.eos_token_id": (gguf.UINT32, n_vocab - 2),      # <|im_end|>
        "tokenizer.ggml.padding_token_id": (gguf.UINT32, n_vocab - 4),  # <|endoftext|>
        "tokenizer.ggml.add_bos_token": (gguf.BOOL, False),
    }


def _rng(seed, name):
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def random_weights(cfg, seed=0, reverse=True, tie=False):
    """-> {name: float32 numpy}, canonical form (layout.py). reverse: add the ssm_rev_* tensors."""
    D, w = cfg.n_embd, {}

    def mat(name, *shape):                                             # (..., out, in)
        w[name] = (_rng(seed, name).standard_normal(shape) / math.sqrt(shape[-1])).astype(np.float32)

    def norm(name, n):
        w[name] = (1 + 0.1 * _rng(seed, name).standard_normal(n)).astype(np.float32)

    def a_param(name):                                                 # -exp(A_log), A = U(1, 16)
        w[name] = (-_rng(seed, name).uniform(1, 16, cfg.gdn_v_heads)).astype(np.float32)

    def dt_bias(name):
        dt = np.exp(_rng(seed, name).uniform(math.log(1e-3), math.log(1e-1), cfg.gdn_v_heads))
        w[name] = np.log(np.expm1(dt)).astype(np.float32)

    w["token_embd.weight"] = _rng(seed, "token_embd.weight").standard_normal((cfg.n_vocab, D)).astype(np.float32)
    norm("output_norm.weight", D)
    if not tie:
        mat("output.weight", cfg.n_vocab, D)
    Hv, dv, hd = cfg.gdn_v_heads, cfg.gdn_v_dim, cfg.head_dim
    for il in range(cfg.n_layer):
        p = f"blk.{il}."
        norm(p + "attn_norm.weight", D)
        norm(p + "post_attention_norm.weight", D)
        if cfg.recurrent[il]:
            mat(p + "attn_qkv.weight", cfg.gdn_channels, D)
            mat(p + "attn_gate.weight", Hv * dv, D)
            w[p + "ssm_conv1d.weight"] = (_rng(seed, p + "ssm_conv1d.weight").standard_normal(
                (cfg.gdn_channels, cfg.conv_kernel)) / math.sqrt(cfg.conv_kernel)).astype(np.float32)
            dt_bias(p + "ssm_dt.bias")
            a_param(p + "ssm_a")
            mat(p + "ssm_beta.weight", Hv, D)
            mat(p + "ssm_alpha.weight", Hv, D)
            norm(p + "ssm_norm.weight", dv)
            mat(p + "ssm_out.weight", D, Hv * dv)
            if reverse:
                mat(p + "ssm_rev_alpha.weight", Hv, D)
                mat(p + "ssm_rev_beta.weight", Hv, D)
                dt_bias(p + "ssm_rev_dt.bias")
                a_param(p + "ssm_rev_a")
        else:
            mat(p + "attn_q.weight", 2 * cfg.n_head * hd, D)
            mat(p + "attn_k.weight", cfg.n_head_kv * hd, D)
            mat(p + "attn_v.weight", cfg.n_head_kv * hd, D)
            mat(p + "attn_output.weight", D, cfg.n_head * hd)
            norm(p + "attn_q_norm.weight", hd)
            norm(p + "attn_k_norm.weight", hd)
        mat(p + "ffn_gate_inp.weight", cfg.n_expert, D)
        mat(p + "ffn_gate_exps.weight", cfg.n_expert, cfg.n_ff_exp, D)
        mat(p + "ffn_up_exps.weight", cfg.n_expert, cfg.n_ff_exp, D)
        mat(p + "ffn_down_exps.weight", cfg.n_expert, D, cfg.n_ff_exp)
        mat(p + "ffn_gate_inp_shexp.weight", 1, D)
        mat(p + "ffn_gate_shexp.weight", cfg.n_ff_shexp, D)
        mat(p + "ffn_up_shexp.weight", cfg.n_ff_shexp, D)
        mat(p + "ffn_down_shexp.weight", D, cfg.n_ff_shexp)
    return w


def fuse_tensors(cfg, w):
    """The converter's optional fused forms: attention `attn_qkv` (q|k|v rows) and `ffn_gate_up_exps`
    (gate rows first). The loader splits them back (layout._split_fused)."""
    w = dict(w)
    for il in range(cfg.n_layer):
        p = f"blk.{il}."
        if not cfg.recurrent[il]:
            w[p + "attn_qkv.weight"] = np.concatenate([w.pop(p + f"attn_{x}.weight") for x in "qkv"], axis=0)
        w[p + "ffn_gate_up_exps.weight"] = np.concatenate(
            [w.pop(p + "ffn_gate_exps.weight"), w.pop(p + "ffn_up_exps.weight")], axis=1)
    return w


def write_random_model(path, layout=OFFICIAL, wtype=gguf.F32, seed=0, pattern="LLLF", tie=False, fuse=False,
                       **cfg_kw):
    """tie: no output.weight (llama.cpp then reuses token_embd); fuse: fused tensors (fuse_tensors).
    cfg_kw: overrides for tiny_config. -> (Config, canonical weights)"""
    cfg = tiny_config(pattern, **cfg_kw)
    weights = random_weights(cfg, seed, reverse=(layout == OFFICIAL), tie=tie)
    write_gguf(path, cfg, fuse_tensors(cfg, weights) if fuse else weights, layout, wtype)
    return cfg, weights


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--layout", default=OFFICIAL, choices=LAYOUTS)
    ap.add_argument("--type", default="f32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pattern", default="LLLF")
    ap.add_argument("--n-embd", type=int, default=64)
    a = ap.parse_args()
    write_random_model(a.out, a.layout, gguf.type_from_name(a.type), a.seed, a.pattern, n_embd=a.n_embd)


if __name__ == "__main__":
    main()
