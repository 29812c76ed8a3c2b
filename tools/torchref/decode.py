"""Greedy reference decoders over model.py (CLOVER-SPEC 2 and 2.1), for token-for-token comparisons.

  ar_generate(m, prompt, n)         AR greedy
  diffusion_generate(m, prompt, n)  block diffusion: denoise [p, M..M] until no mask is left, commit pass
  verify_generate(m, prompt, n)     guess-then-verify: one denoising draft + one causal verify per step;
                                    identical to ar_generate by construction (tested)
Each returns the generated token ids (the pending tokens included, the end token included when it
stops there). Greedy only (temperature 0); sampling is left to the engine's own sampler tests.
"""
import math

import torch


def _best_non_mask(logits, mask_id):
    """-> (token, log-probability) per row; the mask token is never proposed (its own probability
    is not renormalised away)."""
    logp = torch.log_softmax(logits.to(torch.float64), dim=-1)
    if mask_id >= 0:
        logp = logp.clone()
        logp[:, mask_id] = -math.inf
    best = logp.max(dim=-1)
    return best.indices.tolist(), best.values.tolist()


def _prefill(m, prompt):
    logits, state = m.forward(prompt)
    return state, int(logits[-1].argmax())


def ar_generate(m, prompt, n, eos_ids=()):
    state, p = _prefill(m, prompt)
    out = [p]
    while len(out) < n and p not in eos_ids:
        logits, state = m.forward([p], state)
        p = int(logits[-1].argmax())
        out.append(p)
    return out


def diffusion_generate(m, prompt, n, eos_ids=(), block_size=None, tau=None, mask_id=None, use_reverse=True,
                       stats=None):
    """Block diffusion with greedy choices. tau is the file's f32 threshold widened to double; a masked
    position commits when its log-probability >= log(tau), and each pass commits at least the most
    confident masked position (ties: lowest position). stats: optional dict, gets "passes" (denoising
    passes) and "committed" (masked positions filled by them) added."""
    B = block_size or m.cfg.block_size
    tau = float(torch.tensor(m.cfg.threshold if tau is None else tau, dtype=torch.float32))
    mask = m.cfg.mask_token_id if mask_id is None else mask_id
    state, p = _prefill(m, prompt)
    out = []
    while True:
        if p in eos_ids or len(out) + 1 >= n:
            return out + [p]
        need = min(B, n - len(out))                                   # block positions still wanted
        block = [p] + [mask] * (B - 1)
        while mask in block[:need]:
            tok, logp = _best_non_mask(m.denoise(block, state, use_reverse=use_reverse), mask)
            masked = [i for i in range(1, need) if block[i] == mask]   # position i reads output i-1
            take = [i for i in masked if logp[i - 1] >= math.log(tau)]
            if not take:
                take = [max(masked, key=lambda i: (logp[i - 1], -i))]
            if stats is not None:
                stats["passes"] = stats.get("passes", 0) + 1
                stats["committed"] = stats.get("committed", 0) + len(take)
            for i in take:
                block[i] = tok[i - 1]
            end = _first_finished_end(block[:need], mask, eos_ids)
            if end is not None:
                return out + block[:end + 1]
        if len(out) + need >= n:                                       # length limit reached
            return out + block[:need]
        logits, state = m.commit(block, state)
        out += block
        p = int(logits[-1].argmax())


def _first_finished_end(block, mask, eos_ids):
    """Index of an end token with no mask before it, else None."""
    for i, t in enumerate(block):
        if t == mask:
            return None
        if t in eos_ids:
            return i
    return None


def verify_generate(m, prompt, n, eos_ids=(), block_size=None, mask_id=None, use_reverse=True, stats=None):
    """Guess-then-verify, greedy: draft d1..d(B-1) by one denoising pass over [p, M x (B-1)], verify
    with one causal pass over [p, d1..d(B-1)] (AR argmax a_i at every position), accept the longest
    run with d(i+1) == a_i, emit p, d1..dc; a_c is the next pending token. stats: optional dict, gets
    "cycles" and "accepted" (draft tokens accepted, c per cycle) added."""
    B = block_size or m.cfg.block_size
    mask = m.cfg.mask_token_id if mask_id is None else mask_id
    state, p = _prefill(m, prompt)
    out = []
    while True:
        if p in eos_ids or len(out) + 1 >= n:
            return out + [p]
        draft, _ = _best_non_mask(m.denoise([p] + [mask] * (B - 1), state, use_reverse=use_reverse), mask)
        block = [p] + draft[:B - 1]
        a = m.forward(block, state)[0].argmax(dim=-1).tolist()         # verify from the snapshot at p
        c = 0
        while c < B - 1 and block[c + 1] == a[c]:
            c += 1
        if stats is not None:
            stats["cycles"] = stats.get("cycles", 0) + 1
            stats["accepted"] = stats.get("accepted", 0) + c
        accepted = block[:c + 1]
        end = _first_finished_end(accepted, mask, eos_ids)
        if end is not None or len(out) + len(accepted) >= n:
            return (out + accepted[:(end + 1) if end is not None else len(accepted)])[:n]
        out += accepted
        _, state = m.forward(accepted, state)                          # the cache keeps exactly these
        p = a[c]
