"""One batched pass that computes, for training, what inference computes one block at a time:

  - the AR (causal) pass over N clean sequences of length L (= CloverRef.forward), and
  - the denoising passes (= CloverRef.denoise, CLOVER-SPEC 2) of J blocks per sequence at once:
    block j of sequence n starts at position s = starts[n, j]; its committed prefix is the clean
    tokens 0..s-1, its input is [p = clean token s, t1..t(B-1)] with mask ids where undecided.

How the blocks see their prefix without one pass per block (the "two streams" of block-diffusion
training): the clean stream is the committed text, computed causally once. Each block is a second
stream that reads the clean stream's keys/values before s (attention) and starts its GDN forward
scan from the clean scan's state after token s-1 and its conv from the clean pre-conv inputs s-K+1..s-1
(exactly the committed State at n_past = s); inside the block attention is bidirectional and the
reverse in-block path (CLOVER-SPEC 3.3) runs. The clean stream never reads the blocks. The same
weights dict as torchref (CloverParams.as_dict()); tests/train check this against torchref's
forward and denoise.

Shapes: N sequences, L clean positions, J blocks of B positions, D = n_embd, C = GDN conv channels.
"""
import math

import torch
import torch.nn.functional as F

from tools.torchref.model import CloverRef, l2_norm, moe_layer, rms_norm, rope


def joint_forward(m: CloverRef, tokens, blocks, starts, out_rows_clean=None, out_rows_blocks=None):
    """tokens: (N, L) long; blocks: (N, J, B) long; starts: (N, J) long, 1 <= s <= L-1.
    out_rows_clean: optional bool (N, L), the clean positions whose logits are wanted (saves the
    output matmul elsewhere); out_rows_blocks: the same for the blocks, bool (N, J, B).
    -> clean logits (N, L, V) or (n_selected, V), block logits (N, J, B, V) or (n_selected, V)"""
    cfg, w = m.cfg, m.w
    N, L = tokens.shape
    J, B = blocks.shape[1], blocks.shape[2]
    xc = w["token_embd.weight"][tokens]                                # (N, L, D)
    xb = w["token_embd.weight"][blocks].reshape(N, J * B, -1)          # (N, JB, D)
    for il in range(cfg.n_layer):
        p = f"blk.{il}."
        hc = rms_norm(xc, w[p + "attn_norm.weight"], cfg.eps)
        hb = rms_norm(xb, w[p + "attn_norm.weight"], cfg.eps)
        if cfg.recurrent[il]:
            yc, yb = gdn_joint(m, il, hc, hb.view(N, J, B, -1), starts)
            yb = yb.reshape(N, J * B, -1)
        else:
            yc, yb = attention_joint(m, il, hc, hb, starts, B)
        xc, xb = xc + yc, xb + yb
        D = xc.shape[-1]
        h2 = rms_norm(torch.cat([xc.reshape(-1, D), xb.reshape(-1, D)]), w[p + "post_attention_norm.weight"], cfg.eps)
        f = moe_layer(m, il, h2)                                       # (N*L + N*JB, D)
        xc = xc + f[:N * L].view(N, L, D)
        xb = xb + f[N * L:].view(N, J * B, D)
    out_name = "output.weight" if "output.weight" in w else "token_embd.weight"
    xc = rms_norm(xc, w["output_norm.weight"], cfg.eps)
    if out_rows_clean is not None:
        xc = xc[out_rows_clean]
    xb = rms_norm(xb, w["output_norm.weight"], cfg.eps).view(N, J, B, -1)
    if out_rows_blocks is not None:
        xb = xb[out_rows_blocks]
    return m.linear(xc, out_name), m.linear(xb, out_name)


def attention_joint(m, il, hc, hb, starts, B):
    """hc: (N, L, D) clean, hb: (N, JB, D) blocks. Clean rows: causal. Block row (j, i): clean keys
    < s_j and the B keys of block j (RoPE position s_j + i). -> (N, L, D), (N, JB, D)"""
    cfg, p = m.cfg, f"blk.{il}."
    N, L, _ = hc.shape
    JB = hb.shape[1]
    J = JB // B
    hd, H, Hkv = cfg.head_dim, cfg.n_head, cfg.n_head_kv
    pos_c = torch.arange(L).expand(N, L)                               # (N, L)
    pos_b = (starts[:, :, None] + torch.arange(B)).reshape(N, JB)      # (N, JB)

    def qkv(h, pos):
        T = h.shape[1]
        qg = m.linear(h, p + "attn_q.weight").view(N, T, H, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:]
        k = m.linear(h, p + "attn_k.weight").view(N, T, Hkv, hd)
        v = m.linear(h, p + "attn_v.weight").view(N, T, Hkv, hd)
        q = rope(rms_norm(q, m.w[p + "attn_q_norm.weight"], cfg.eps).reshape(N * T, H, hd), pos.reshape(-1), cfg)
        k = rope(rms_norm(k, m.w[p + "attn_k_norm.weight"], cfg.eps).reshape(N * T, Hkv, hd), pos.reshape(-1), cfg)
        heads = lambda t, n: t.view(N, T, n, hd).transpose(1, 2)     # (N, n, T, hd)
        rep = lambda t: t.repeat_interleave(H // Hkv, dim=1)          # GQA: query head h reads kv head h // (H/Hkv)
        return heads(q, H), gate, rep(heads(k, Hkv)), rep(v.transpose(1, 2))

    qc, gc, kc, vc = qkv(hc, pos_c)
    qb, gb, kb, vb = qkv(hb, pos_b)
    scale = 1.0 / math.sqrt(hd)
    # clean rows: causal
    s_cc = qc @ kc.transpose(-1, -2) * scale                           # (N, H, L, L)
    s_cc = s_cc.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
    oc = torch.softmax(s_cc, -1) @ vc                                  # (N, H, L, hd)
    # block rows: committed prefix + own block
    s_bc = qb @ kc.transpose(-1, -2) * scale                           # (N, H, JB, L)
    s_start = starts.repeat_interleave(B, dim=1)                       # (N, JB)
    s_bc = s_bc.masked_fill((torch.arange(L)[None, None, :] >= s_start[:, :, None])[:, None], float("-inf"))
    s_bb = qb @ kb.transpose(-1, -2) * scale                           # (N, H, JB, JB)
    blk = torch.arange(JB) // B
    s_bb = s_bb.masked_fill((blk[:, None] != blk[None, :])[None, None], float("-inf"))
    ob = torch.softmax(torch.cat([s_bc, s_bb], -1), -1) @ torch.cat([vc, vb], 2)  # (N, H, JB, hd)

    def out(o, gate):
        T = o.shape[2]
        o = o.transpose(1, 2) * torch.sigmoid(gate)                    # (N, T, H, hd)
        return m.linear(o.reshape(N, T, H * hd), p + "attn_output.weight")
    return out(oc, gc), out(ob, gb)


def chunked_scan(q, k, v, g, beta, S, chunk=32, exclusive=False):
    """Gated delta rule over time axis 1, in chunks (the WY form: one triangular solve per chunk
    instead of one Python step per position; the same numbers as torchref's delta_rule_scan).
    q, k: (M, T, H, dk); v: (M, T, H, dv); g, beta: (M, T, H); S: (M, H, dk, dv) the state before t = 0.
    Per step: S = e^g S; delta = beta (v - S^T k); S += k delta^T. o_t = S_t^T q_t / sqrt(dk), or with
    exclusive=True the state before step t (S_(t-1)), which the reverse in-block path reads.
    Within a chunk, with G the cumulative g: (I + diag(beta) A) delta = diag(beta) (V - diag(e^G) K S0),
    A[t, s] = e^(G_t - G_s) k_t.k_s for s < t.
    -> o (M, T, H, dv), and `parts` for states_at()"""
    Mb, T, H, dk = k.shape
    dv = v.shape[-1]
    pad = (-T) % chunk
    if pad:                                                            # beta = 0, k = 0: no effect
        z = lambda x: torch.cat([x, x.new_zeros(Mb, pad, *x.shape[2:])], 1)
        q, k, v, g, beta = z(q), z(k), z(v), z(g), z(beta)
    n, C = (T + pad) // chunk, chunk
    rs = lambda x: x.reshape(Mb, n, C, H, -1).permute(0, 3, 1, 2, 4)  # (M, H, n, C, d)
    q, k, v = rs(q), rs(k), rs(v)
    g, beta = rs(g[..., None])[..., 0], rs(beta[..., None])[..., 0]    # (M, H, n, C)
    G = g.cumsum(-1)
    incl = torch.ones(C, C, dtype=torch.bool).tril()
    strict = torch.ones(C, C, dtype=torch.bool).tril(-1)
    decay = torch.exp((G[..., :, None] - G[..., None, :]).masked_fill(~incl, float("-inf")))  # (M, H, n, C, C)
    A = decay * (k @ k.transpose(-1, -2)) * strict
    Tm = torch.eye(C, dtype=k.dtype) + beta[..., :, None] * A
    rhs = torch.cat([beta[..., None] * v, (beta * torch.exp(G))[..., None] * k], -1)
    sol = torch.linalg.solve_triangular(Tm, rhs, upper=False, unitriangular=True)
    U, W = sol[..., :dv], sol[..., dv:]
    if exclusive:
        Gq = G - g                                                     # G_(t-1)
        qk = (q @ k.transpose(-1, -2)) * torch.exp((Gq[..., :, None] - G[..., None, :]).masked_fill(~strict, float("-inf")))
    else:
        Gq = G
        qk = (q @ k.transpose(-1, -2)) * decay
    scale = 1.0 / math.sqrt(dk)
    outs, starts, deltas = [], [], []
    for c in range(n):
        starts.append(S)
        delta = U[:, :, c] - W[:, :, c] @ S                            # (M, H, C, dv)
        outs.append(torch.exp(Gq[:, :, c])[..., None] * (q[:, :, c] @ S) + qk[:, :, c] @ delta)
        last = G[:, :, c, -1:]                                         # (M, H, 1)
        S = torch.exp(last)[..., None] * S + (k[:, :, c] * torch.exp(last - G[:, :, c])[..., None]).transpose(-1, -2) @ delta
        deltas.append(delta)
    o = (scale * torch.stack(outs, 2)).permute(0, 2, 3, 1, 4).reshape(Mb, n * C, H, dv)[:, :T]
    parts = dict(S=torch.stack(starts, 2), delta=torch.stack(deltas, 2), k=k, G=G, decay=decay, chunk=C)
    return o, parts


def states_at(parts, t):
    """The state after step t[i, j] of sequence i (t: (M, J) long, 0 <= t < T). -> (M, J, H, dk, dv)"""
    C = parts["chunk"]
    c, r = t // C, t % C
    i = torch.arange(t.shape[0])[:, None].expand_as(t)
    S0 = parts["S"][i, :, c]                                           # (M, J, H, dk, dv)
    w = parts["decay"][i, :, c, r]                                     # (M, J, H, C): e^(G_r - G_s), s <= r
    k, d = parts["k"][i, :, c], parts["delta"][i, :, c]                # (M, J, H, C, dk|dv)
    Gr = parts["G"][i, :, c, r]                                        # (M, J, H)
    return torch.exp(Gr)[..., None, None] * S0 + torch.einsum("mjhs,mjhsa,mjhsb->mjhab", w, k, d)


def gdn_joint(m, il, hc, hb, starts):
    """hc: (N, L, D) clean; hb: (N, J, B, D) blocks. -> (N, L, D), (N, J, B, D)"""
    cfg, p = m.cfg, f"blk.{il}."
    N, L, D = hc.shape
    J, B = hb.shape[1], hb.shape[2]
    Hk, Hv, dk, dv, K = cfg.gdn_k_heads, cfg.gdn_v_heads, cfg.gdn_k_dim, cfg.gdn_v_dim, cfg.conv_kernel
    convw = m.w[p + "ssm_conv1d.weight"]                               # (C, K)

    def proj(h):
        z = m.linear(h, p + "attn_gate.weight")
        beta = torch.sigmoid(m.linear(h, p + "ssm_beta.weight"))
        g = F.softplus(m.linear(h, p + "ssm_alpha.weight") + m.w[p + "ssm_dt.bias"]) * m.w[p + "ssm_a"]
        return m.linear(h, p + "attn_qkv.weight"), z, beta, g

    def qkv(c):
        sh = c.shape[:-1]
        q = l2_norm(c[..., :Hk * dk].reshape(*sh, Hk, dk), cfg.eps)
        k = l2_norm(c[..., Hk * dk:2 * Hk * dk].reshape(*sh, Hk, dk), cfg.eps)
        v = c[..., 2 * Hk * dk:].reshape(*sh, Hv, dv)
        tiled = torch.arange(Hv) % Hk                                  # value head h uses key head h mod H_k
        return q[..., tiled, :], k[..., tiled, :], v

    mc, zc, bc, gc = proj(hc)                                          # mc: (N, L, C)
    mb, zb, bb, gb = proj(hb)                                          # mb: (N, J, B, C)
    C = mc.shape[-1]
    # clean conv from a zero state; padded row r holds position r - (K-1)
    xpad = torch.cat([mc.new_zeros(N, K - 1, C), mc], 1)               # (N, L+K-1, C)
    cc = F.silu((xpad.unfold(1, K, 1) * convw).sum(-1))                # (N, L, C)
    # block conv: the committed inputs s-K+1..s-1 (padded rows s..s+K-2), then the block's own
    hist_idx = starts[:, :, None] + torch.arange(K - 1)                # (N, J, K-1)
    hist = torch.gather(xpad, 1, hist_idx.reshape(N, -1, 1).expand(-1, -1, C)).view(N, J, K - 1, C)
    xb = torch.cat([hist, mb], 2)                                      # (N, J, K-1+B, C)
    cb = F.silu((xb.unfold(2, K, 1) * convw).sum(-1))                  # (N, J, B, C)

    q, k, v = qkv(cc)
    oc, parts = chunked_scan(q, k, v, gc, bc, hc.new_zeros(N, Hv, dk, dv))
    S0 = states_at(parts, starts - 1)                                  # (N, J, Hv, dk, dv): committed state at s
    q, k, v = (t.reshape(N * J, B, Hv, -1) for t in qkv(cb))
    gb2, bb2 = gb.reshape(N * J, B, Hv), bb.reshape(N * J, B, Hv)
    ob, _ = chunked_scan(q, k, v, gb2, bb2, S0.reshape(N * J, Hv, dk, dv), chunk=B)
    hb2 = hb.reshape(N * J, B, D)
    beta_r = torch.sigmoid(m.linear(hb2, p + "ssm_rev_beta.weight"))
    g_r = F.softplus(m.linear(hb2, p + "ssm_rev_alpha.weight") + m.w[p + "ssm_rev_dt.bias"]) * m.w[p + "ssm_rev_a"]
    # reverse in-block path = an exclusive scan over the reversed block, from R = 0
    fl = lambda x: x.flip(1)
    orev, _ = chunked_scan(fl(q), fl(k), fl(v), fl(g_r), fl(beta_r), hb.new_zeros(N * J, Hv, dk, dv),
                           chunk=B, exclusive=True)
    orev = fl(orev)
    ob = (ob + orev).view(N, J, B, Hv, dv)

    def out(o, z):
        o = rms_norm(o, m.w[p + "ssm_norm.weight"], cfg.eps) * F.silu(z.reshape(*o.shape))
        return m.linear(o.reshape(*o.shape[:-2], Hv * dv), p + "ssm_out.weight")
    return out(oc.view(N, L, Hv, dv), zc), out(ob, zb)
