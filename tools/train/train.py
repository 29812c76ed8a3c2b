"""Train clover-tiny on CPU: the Clover architecture (GDN + gated attention + MoE with a shared
expert + the ssm_rev_* reverse path) with both objectives of issue 5:

  - causal next-token loss on the answer (AR mode, and the first pending token after the prompt);
  - block-diffusion loss that is the denoising pass of inference (CLOVER-SPEC 2): the answer is cut
    into the blocks inference uses (block j = answer tokens jB..jB+B-1, its first one the pending
    token p, its prefix the committed text), each block's positions 1..B-1 are masked with a
    per-block ratio r ~ U(0, 1), and output i-1 is trained to predict the token at masked position i.
    Both come out of one batched pass (joint.py, tested equal to torchref's forward/denoise).

    /usr/bin/python3 -m tools.train.train --run /work/train-run [--config tools/train/config.json] [--steps N]

Everything lives in the run directory: vocab.gguf (BPE trained by `clover vocab --train`), the
tokenised pool (data.pt), log.jsonl, ckpt.pt (resumed automatically), loss.png.
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from tools.torchref import gguf
from tools.torchref.layout import Config
from tools.torchref.model import CloverParams, CloverRef
from tools.torchref.synth import random_weights
from tools.train import dataset
from tools.train.joint import joint_forward

ROOT = dataset.ROOT
DEFAULT_BIN = os.path.join(ROOT, "build-train", "bin", "clover")


# ------------------------------------------------------------------ vocabulary and tokenised data

def clover_bin():
    return os.environ.get("CLOVER_BIN", DEFAULT_BIN)


def build_vocab(run, conf):
    path = os.path.join(run, "vocab.gguf")
    if not os.path.exists(path):
        corpus = os.path.join(run, "corpus.txt")
        ex = dataset.generate(conf["vocab"]["corpus_examples"], seed=conf["seed"] + 1, split="train")
        with open(corpus, "w", encoding="utf-8") as f:
            for e in ex:
                f.write(e["prompt"] + e["answer"] + "\n")
        subprocess.run([clover_bin(), "vocab", "--train", corpus, "--merges", str(conf["vocab"]["merges"]),
                        "--out", path], check=True)
    return path


def tokenize(vocab, texts, tmp):
    """Token ids of each text, by the engine's tokenizer (special tokens parsed)."""
    with open(tmp + ".in.jsonl", "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    subprocess.run([clover_bin(), "vocab", "-m", vocab, "--encode", tmp + ".in.jsonl", "--out", tmp + ".out.jsonl"],
                   check=True, stderr=subprocess.DEVNULL)
    with open(tmp + ".out.jsonl") as f:
        ids = [json.loads(line) for line in f]
    os.remove(tmp + ".in.jsonl"), os.remove(tmp + ".out.jsonl")
    assert len(ids) == len(texts)
    return ids


def vocab_info(vocab):
    f = gguf.GGUFFile(vocab)
    toks = f.meta["tokenizer.ggml.tokens"]
    ids = {t: i for i, t in enumerate(toks)}
    return {"n_vocab": len(toks), "mask": ids["<|mask|>"], "pad": ids["<|endoftext|>"], "im_end": ids["<|im_end|>"]}


def tokenized_examples(vocab, examples, tmp):
    ids = tokenize(vocab, [t for e in examples for t in (e["prompt"], e["answer"])], tmp)
    return [dict(e, prompt_ids=ids[2 * i], answer_ids=ids[2 * i + 1]) for i, e in enumerate(examples)]


def build_pool(run, conf, vocab):
    path = os.path.join(run, "data.pt")
    if not os.path.exists(path):
        ex = dataset.generate(conf["data"]["pool"], seed=conf["seed"], split="train", max_orders=conf["data"]["max_orders"],
                              preamble_p=conf["data"].get("preamble_p", 0.0), no_think_p=conf["data"].get("no_think_p", 0.0))
        ex = tokenized_examples(vocab, ex, os.path.join(run, "tok"))
        pool = [{"p": e["prompt_ids"], "a": e["answer_ids"], "family": e["family"],
                 "n_orders": e["meta"].get("n_orders", 0)} for e in ex]
        torch.save(pool, path + ".tmp")
        os.replace(path + ".tmp", path)
    return torch.load(path)


# ------------------------------------------------------------------ model

def model_config(conf, vinfo, vocab_path):
    mc = dict(conf["model"])
    pattern = mc.pop("pattern")
    cfg = Config(n_layer=len(pattern), n_vocab=vinfo["n_vocab"], recurrent=[c == "L" for c in pattern],
                 mask_token_id=vinfo["mask"], **mc)
    f = gguf.GGUFFile(vocab_path)
    cfg.extra = {k: (f.meta_types[k], v) for k, v in f.meta.items() if k.startswith("tokenizer.")}
    with open(dataset.TEMPLATE_PATH, encoding="utf-8") as t:
        cfg.extra["tokenizer.chat_template"] = (gguf.STRING, t.read())
    cfg.extra["general.name"] = (gguf.STRING, "clover-tiny")
    return cfg


def init_weights(cfg, seed):
    """torchref's random weights (1/sqrt(fan_in) matrices, Mamba-style A and dt), with the residual
    output projections scaled by 1/sqrt(2 n_layer) and unit norms, as usual for pre-norm stacks."""
    w = {n: torch.from_numpy(a).float() for n, a in random_weights(cfg, seed=seed).items()}
    for n in w:
        if n.endswith(("ssm_out.weight", "attn_output.weight", "ffn_down_exps.weight", "ffn_down_shexp.weight")):
            w[n] *= 1 / math.sqrt(2 * cfg.n_layer)
        if n.endswith("norm.weight"):
            w[n] = torch.ones_like(w[n])
        if n == "token_embd.weight":
            w[n] *= 0.5
    return w


# ------------------------------------------------------------------ batches

class Batcher:
    """Length-bucketed batches (the GDN scan costs per position, so short sequences travel together)
    with the curriculum's phase: its limit on drone orders and its per-family sampling weights."""

    def __init__(self, pool, conf, vinfo, rng):
        self.pool, self.conf, self.v, self.rng = pool, conf, vinfo, rng
        self.B = conf["model"]["block_size"]
        self._buckets = {}

    def phase(self, step):
        for ph in self.conf["curriculum"]:
            if step < ph["until_step"]:
                return ph
        return {"max_orders": self.conf["data"]["max_orders"]}

    def max_orders(self, step):
        return self.phase(step)["max_orders"]

    def buckets(self, phase):
        """-> (members per bucket, member weights per bucket, bucket weights) for a curriculum phase."""
        fw = phase.get("family_weights", {})
        key = json.dumps([phase["max_orders"], fw], sort_keys=True)
        if key not in self._buckets:
            b = {}
            for i, e in enumerate(self.pool):
                if e["family"] == "drone" and e["n_orders"] > phase["max_orders"]:
                    continue
                b.setdefault((len(e["p"]) + len(e["a"])) // 48, []).append(i)
            keys = sorted(b)
            weights = [[fw.get(self.pool[i]["family"], 1.0) for i in b[k]] for k in keys]
            self._buckets[key] = (keys, [b[k] for k in keys], weights, [sum(w) for w in weights])
        return self._buckets[key]

    def sample(self, step):
        keys, members, weights, sizes = self.buckets(self.phase(step))
        k = self.rng.choices(range(len(keys)), weights=sizes)[0]
        L_est = (keys[k] + 1) * 48
        n = max(1, min(self.conf["train"]["max_batch"], self.conf["train"]["tokens_per_step"] // L_est))
        if len(set(weights[k])) == 1:
            idx = [self.rng.choice(members[k]) for _ in range(n)]      # the unweighted draw (earlier phases)
        else:
            idx = self.rng.choices(members[k], weights=weights[k], k=n)
        return self.make([self.pool[i] for i in idx])

    def make(self, exs):
        """-> tensors for joint_forward and the two losses."""
        B, pad, mask = self.B, self.v["pad"], self.v["mask"]
        seqs = [e["p"] + e["a"] for e in exs]
        L = max(map(len, seqs))
        N = len(exs)
        nblk = [(len(e["a"]) - 2) // B + 1 for e in exs]
        J = max(nblk)
        tokens = torch.full((N, L), pad, dtype=torch.long)
        ar_rows = torch.zeros(N, L, dtype=torch.bool)                  # position t predicts t+1 (an answer token)
        ar_tgt = []
        starts = torch.ones(N, J, dtype=torch.long)
        blocks = torch.full((N, J, B), pad, dtype=torch.long)
        d_tgt = torch.full((N, J, B), -100, dtype=torch.long)          # at output i: the token of position i+1
        d_w = torch.zeros(N, J, B)
        for n, (e, s) in enumerate(zip(exs, seqs)):
            tokens[n, :len(s)] = torch.tensor(s)
            P0, A = len(e["p"]), len(e["a"])
            ar_rows[n, P0 - 1:P0 + A - 1] = True
            full = s + [pad] * B
            for j in range(nblk[n]):
                st = P0 + j * B
                blk = torch.tensor(full[st:st + B])
                r = self.rng.random()
                m = torch.tensor([self.rng.random() < r for _ in range(B - 1)])
                if not m.any():
                    m[self.rng.randrange(B - 1)] = True
                starts[n, j] = st
                blocks[n, j] = blk
                blocks[n, j, 1:][m] = mask
                d_tgt[n, j, :B - 1] = torch.where(m, blk[1:], torch.tensor(-100))
                beyond = torch.arange(st + 1, st + B) >= len(s)       # padding after the end token
                d_w[n, j, :B - 1] = torch.where(beyond, self.conf["train"]["pad_target_weight"], 1.0) * m
        for n, s in enumerate(seqs):
            ar_tgt.append(torch.tensor(s[len(exs[n]["p"]):]))
        return dict(tokens=tokens, blocks=blocks, starts=starts, ar_rows=ar_rows, ar_tgt=torch.cat(ar_tgt),
                    d_tgt=d_tgt, d_w=d_w, n_tokens=int(sum(map(len, seqs))), n_block_tokens=int(N * J * B))


def losses(m, b):
    rows = b["d_w"] > 0                                               # masked positions' outputs only
    lc, lb = joint_forward(m, b["tokens"], b["blocks"], b["starts"], out_rows_clean=b["ar_rows"], out_rows_blocks=rows)
    ar = F.cross_entropy(lc, b["ar_tgt"])
    ce = F.cross_entropy(lb, b["d_tgt"][rows], reduction="none")
    w = b["d_w"][rows]
    diff = (ce * w).sum() / w.sum().clamp(min=1e-6)
    return ar, diff


# ------------------------------------------------------------------ the loop

def lr_at(step, tc):
    if step < tc["warmup"]:
        return tc["lr"] * (step + 1) / tc["warmup"]
    hold = int(tc["hold_until"] * tc["steps"])
    if step < hold:
        return tc["lr"]                                                 # held up through the plateau
    frac = min(1.0, (step - hold) / max(1, tc["steps"] - hold))
    return tc["lr"] * (1 - (1 - tc["final_lr_frac"]) * frac)


def plot(run):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rows = [json.loads(x) for x in open(os.path.join(run, "log.jsonl"))]
    if not rows:
        return
    s = [r["step"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key, label in (("ar", "causal (AR) loss"), ("diff", "block-diffusion loss")):
        ax.plot(s, [r[key] for r in rows], label=label, alpha=0.35)
        k = 20
        sm = [sum(r[key] for r in rows[max(0, i - k):i + 1]) / len(rows[max(0, i - k):i + 1]) for i in range(len(rows))]
        ax.plot(s, sm, label=label + " (smoothed)")
    ax.set_yscale("log"), ax.set_xlabel("step"), ax.set_ylabel("loss (nats/token)"), ax.grid(alpha=0.3)
    ax.set_title("clover-tiny training"), ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(run, "loss.png"), dpi=100)
    plt.close(fig)


def save(run, params, opt, step, rng, conf):
    ck = {"params": params.state_dict(), "opt": opt.state_dict(), "step": step, "rng": rng.getstate(),
          "torch_rng": torch.get_rng_state(), "conf": conf}
    torch.save(ck, os.path.join(run, "ckpt.pt.tmp"))
    os.replace(os.path.join(run, "ckpt.pt.tmp"), os.path.join(run, "ckpt.pt"))


def load_model(run, ckpt="ckpt.pt"):
    """-> (CloverRef with trained float32 weights, Config, conf) from a run directory."""
    ck = torch.load(os.path.join(run, ckpt))
    conf = ck["conf"]
    vocab = os.path.join(run, "vocab.gguf")
    cfg = model_config(conf, vocab_info(vocab), vocab)
    w = {n.replace("__", "."): t.detach().clone() for n, t in
         ((k[len("params."):], v) for k, v in ck["params"].items())}
    return CloverRef(cfg, w), cfg, conf, ck["step"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="run directory (created; resumed when it holds ckpt.pt)")
    ap.add_argument("--config", default=os.path.join(os.path.dirname(__file__), "config.json"))
    ap.add_argument("--steps", type=int, help="override train.steps")
    ap.add_argument("--pool", type=int, help="override data.pool (smoke runs)")
    ap.add_argument("--tokens-per-step", type=int, help="override train.tokens_per_step (smoke runs)")
    ap.add_argument("--curriculum-from-config", action="store_true",
                    help="on resume, take the curriculum from --config instead of the checkpoint (to extend a run)")
    ap.add_argument("--data-from-config", action="store_true",
                    help="on resume, take the data settings from --config; a pool built with other settings is set aside")
    a = ap.parse_args()
    os.makedirs(a.run, exist_ok=True)
    ck_path = os.path.join(a.run, "ckpt.pt")
    if os.path.exists(ck_path):
        ck = torch.load(ck_path)
        conf = ck["conf"]
    else:
        ck = None
        conf = json.load(open(a.config))
    if ck and a.curriculum_from_config:
        conf["curriculum"] = json.load(open(a.config))["curriculum"]
    if ck and a.data_from_config:
        data = json.load(open(a.config))["data"]
        if data != conf["data"] and os.path.exists(os.path.join(a.run, "data.pt")):
            old = os.path.join(a.run, "data-step{}.pt".format(ck["step"]))
            os.replace(os.path.join(a.run, "data.pt"), old)
            print(f"data settings changed: the old pool is kept as {old}", flush=True)
        conf["data"] = data
    if a.steps:
        conf["train"]["steps"] = a.steps
    if a.pool:
        conf["data"]["pool"] = a.pool
    if a.tokens_per_step:
        conf["train"]["tokens_per_step"] = a.tokens_per_step
    tc = conf["train"]
    torch.set_num_threads(tc["threads"])
    torch.manual_seed(conf["seed"])
    rng = random.Random(conf["seed"])

    vocab = build_vocab(a.run, conf)
    vinfo = vocab_info(vocab)
    t0 = time.time()
    pool = build_pool(a.run, conf, vocab)
    print(f"vocab {vinfo['n_vocab']} tokens, pool {len(pool)} examples ({time.time() - t0:.0f} s)", flush=True)
    cfg = model_config(conf, vinfo, vocab)
    params = CloverParams(init_weights(cfg, conf["seed"]))
    decay = [p for n, p in params.named_parameters() if p.dim() >= 2 and "token_embd" not in n]
    other = [p for n, p in params.named_parameters() if not (p.dim() >= 2 and "token_embd" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tc["weight_decay"]},
                             {"params": other, "weight_decay": 0.0}], lr=tc["lr"], betas=(0.9, 0.95))
    step = 0
    if ck:
        params.load_state_dict(ck["params"])
        opt.load_state_dict(ck["opt"])
        step, _ = ck["step"], rng.setstate(ck["rng"])
        torch.set_rng_state(ck["torch_rng"])
        print(f"resumed at step {step}", flush=True)
    n_par = sum(p.numel() for p in params.parameters())
    print(f"model {n_par / 1e6:.2f}M parameters, pattern {conf['model']['pattern']}, block {cfg.block_size}", flush=True)
    batcher = Batcher(pool, conf, vinfo, rng)
    log = open(os.path.join(a.run, "log.jsonl"), "a")
    last_ck, t_last, tok_acc, steps_acc = time.time(), time.time(), 0, 0
    while step < tc["steps"]:
        lr = lr_at(step, tc)
        for g in opt.param_groups:
            g["lr"] = lr
        b = batcher.sample(step)
        m = CloverRef(cfg, params.as_dict())
        ar, diff = losses(m, b)
        loss = tc["ar_weight"] * ar + tc["diffusion_weight"] * diff
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(params.parameters(), tc["grad_clip"])
        opt.step()
        step += 1
        tok_acc += b["n_tokens"] + b["n_block_tokens"]
        steps_acc += 1
        if step % tc["log_every"] == 0 or step == tc["steps"]:
            dt = time.time() - t_last
            row = {"step": step, "ar": round(ar.item(), 4), "diff": round(diff.item(), 4), "lr": lr,
                   "gnorm": round(gn.item(), 3), "steps_s": round(steps_acc / dt, 3), "tok_s": round(tok_acc / dt, 1),
                   "max_orders": batcher.max_orders(step), "time": round(time.time())}
            log.write(json.dumps(row) + "\n"), log.flush()
            print(f"step {step}/{tc['steps']} ar {row['ar']:.3f} diff {row['diff']:.3f} lr {lr:.2e} "
                  f"|g| {row['gnorm']:.2f} {row['steps_s']:.2f} steps/s {row['tok_s']:.0f} tok/s", flush=True)
            t_last, tok_acc, steps_acc = time.time(), 0, 0
        if time.time() - last_ck > 60 * tc["checkpoint_minutes"] or step == tc["steps"]:
            save(a.run, params, opt, step, rng, conf)
            plot(a.run)
            last_ck = time.time()
    print("done", flush=True)


if __name__ == "__main__":
    sys.exit(main())
