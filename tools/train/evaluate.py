"""Evaluate clover-tiny on held-out examples (issue 5, "Must show").

  - drone dispatch: valid JSON with every order right, in AR, diffusion (tau from the file) and
    guess-then-verify modes;
  - tool use (first turn): the output parsed by the chat layer (`clover parse`) into the right
    get_weather calls;
  - capitals, arithmetic / list transformations, retrieval: exact answer;
  - no_think: capital and drone prompts rendered with enable_thinking false (the template's empty
    think block ends the prompt): the right answer and no `</think>` of the model's own;
  - diffusion: tokens generated per denoising pass, and how often its output equals AR greedy;
  - guess-then-verify: identical to AR greedy? tokens per draft-and-verify cycle;
  - wall-clock tokens/s of the three modes, side by side.

The three modes run in the engine (`clover run --mode ar|diffusion|spec --prompt-tokens F
--print-tokens`, one thread). `--reference` also runs torchref's reference decoders
(tools/torchref/decode.py, float64 with ggml's activation rounding; slow) on the same prompts and
reports how often the engine's output equals the reference's, mode by mode.

    /usr/bin/python3 -m tools.train.evaluate models/clover-tiny.gguf [--n 40] [--quick] [--reference] [--device vulkan]
        [--out results.json]
"""
import argparse
import json
import os
import re
import subprocess
import tempfile
import sys

from tools.torchref import gguf
from tools.train import dataset
from tools.train.train import clover_bin, tokenized_examples


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b), cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


class Detok:
    def __init__(self, path):
        f = gguf.GGUFFile(path)
        self.tokens, self.types = f.meta["tokenizer.ggml.tokens"], f.meta["tokenizer.ggml.token_type"]
        self.bd = byte_decoder()
        self.eos = [i for i, t in enumerate(self.tokens) if t in ("<|im_end|>", "<|endoftext|>")]

    def __call__(self, ids):
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            out += t.encode() if self.types[i] in (3, 4) else bytes(self.bd[c] for c in t)
        return out.decode("utf-8", errors="replace")


def content_of(text):
    """The answer's content: after "</think>\n\n", before <|im_end|>."""
    text = text.split("<|im_end|>")[0]
    return text.split("</think>", 1)[1].strip() if "</think>" in text else text.strip()


def drone_ok(text, orders):
    try:
        return json.loads(content_of(text)) == orders
    except (ValueError, TypeError):
        return False


def tool_calls_ok(text, cities):
    """Parsed by the engine's chat layer, as the server would."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump([dataset.WEATHER_TOOL], f)
    try:
        r = subprocess.run([clover_bin(), "parse", "--tools", f.name], input=text.split("<|im_end|>")[0],
                           capture_output=True, text=True)
        msg = json.loads(r.stdout)
    except (ValueError, OSError):
        return False
    finally:
        os.remove(f.name)
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg.get("tool_calls") or []]
    return calls == [("get_weather", {"city": c}) for c in cities]


STATS = re.compile(r"generation: (\d+) tokens in ([0-9.]+) s")
MODE_STATS = re.compile(r"mode \w+: (\d+) passes \((\d+) denoising")


def engine_generate(model, prompt_ids, n, mode, threshold=None, device="cpu"):
    """-> (token ids, {"tokens", "seconds", "passes", "denoise_passes"}) from `clover run`."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(prompt_ids, f)
    try:
        cmd = [clover_bin(), "run", "-m", model, "--prompt-tokens", f.name, "--print-tokens", "-n", str(n),
               "-t", "1", "--mode", mode, "--device", device]
        if threshold is not None:
            cmd += ["--threshold", str(threshold)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
        ids = json.loads(r.stdout.strip().splitlines()[-1])
        g = STATS.search(r.stderr)
        st = {"tokens": int(g.group(1)), "seconds": float(g.group(2)), "passes": 0, "denoise_passes": 0}
        ms = MODE_STATS.search(r.stderr)
        if ms:
            st["passes"], st["denoise_passes"] = int(ms.group(1)), int(ms.group(2))
        return ids, st
    finally:
        os.remove(f.name)


def score(fam, text, meta):
    if fam == "no_think":
        # The prompt already closed the think block: a `</think>` in the output is the model
        # writing a think note into the answer.
        return "</think>" not in text and score(meta["family"], text, meta)
    if fam == "drone":
        return drone_ok(text, meta["orders"])
    if fam == "tools":
        return tool_calls_ok(text, meta["cities"])
    if fam == "capital":
        return content_of(text) == meta["capital"]
    if fam == "math":
        return content_of(text) == meta["expected"]
    return content_of(text) == meta["code"]


MODES = ("ar", "diffusion", "spec")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--n", type=int, default=40, help="held-out examples per family")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-new", type=int, default=160)
    ap.add_argument("--threshold", type=float, help="diffusion threshold (default: the file's)")
    ap.add_argument("--quick", action="store_true", help="CI subset: 3 examples per family")
    ap.add_argument("--reference", action="store_true", help="also run torchref's decoders and compare (slow)")
    ap.add_argument("--dtype", default="f64", choices=["f64", "f32"], help="reference precision")
    ap.add_argument("--device", default="cpu", help="where the engine runs: cpu, vulkan, vulkan:N")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.quick:
        a.n = 3
    detok = Detok(a.model)
    eos = detok.eos
    ex = []
    for fam in ("drone", "tools", "capital", "math", "retrieval"):
        ex += [e for e in dataset.generate(a.n * 2, a.seed, "heldout", weights={fam: 1.0})
               if not (fam == "tools" and e["meta"]["turn"] != 1)][:a.n]
    # Half capitals, half drone messages, with thinking off.
    for fam in ("capital", "drone"):
        n = a.n // 2 if fam == "capital" else a.n - a.n // 2
        ex += [dict(e, family="no_think", meta=dict(e["meta"], family=fam))
               for e in dataset.generate(n, a.seed, "heldout", weights={fam: 1.0}, no_think_p=1.0)]
    with tempfile.TemporaryDirectory() as tmp:
        ex = tokenized_examples(a.model, ex, os.path.join(tmp, "tok"))
    ref = None
    if a.reference:
        import torch
        from tools.torchref import decode
        from tools.torchref.model import CloverRef
        torch.set_num_threads(1)
        ref = CloverRef.from_gguf(a.model, dtype=torch.float64 if a.dtype == "f64" else torch.float32, act_quant=True)
    res = {"model": a.model, "device": a.device, "n_per_family": a.n, "families": {}}
    tot = {m: {"tokens": 0, "seconds": 0.0, "passes": 0, "denoise_passes": 0} for m in MODES}
    agree = {"diffusion": 0, "spec": 0}
    ref_agree = {m: 0 for m in MODES}
    for i, e in enumerate(ex):
        fam, prompt = e["family"], e["prompt_ids"]
        outs = {}
        for mode in MODES:
            outs[mode], st = engine_generate(a.model, prompt, a.max_new, mode, a.threshold if mode == "diffusion" else None,
                                             a.device)
            for k in tot[mode]:
                tot[mode][k] += st[k]
        agree["diffusion"] += outs["diffusion"] == outs["ar"]
        agree["spec"] += outs["spec"] == outs["ar"]
        if ref is not None:
            with torch.no_grad():
                r_ar = decode.ar_generate(ref, prompt, a.max_new, eos_ids=eos)
                r_diff = decode.diffusion_generate(ref, prompt, a.max_new, eos_ids=eos)
                r_ver = decode.verify_generate(ref, prompt, a.max_new, eos_ids=eos)
            for mode, r in (("ar", r_ar), ("diffusion", r_diff), ("spec", r_ver)):
                ref_agree[mode] += outs[mode] == r
        r = res["families"].setdefault(fam, {"n": 0, **{m: 0 for m in MODES}})
        r["n"] += 1
        for mode in MODES:
            r[mode] += score(fam, detok(outs[mode]), e["meta"])
        if r["n"] <= 2:
            print(f"[{fam}] expected {e['answer']!r}\n   ar: {detok(outs['ar'])!r}\n diff: {detok(outs['diffusion'])!r}",
                  flush=True)
        print(f"{i + 1}/{len(ex)} examples", file=sys.stderr, flush=True)
    for fam, r in res["families"].items():
        for mode in MODES:
            r[mode] = r[mode] / r["n"]
    n = len(ex)
    d, v = tot["diffusion"], tot["spec"]
    # generated tokens (the end token included) per denoising pass; a diffusion block also costs one
    # causal commit pass, counted in "passes"
    res["diffusion_tokens_per_denoising_pass"] = d["tokens"] / max(1, d["denoise_passes"])
    res["diffusion_tokens_per_pass"] = d["tokens"] / max(1, d["passes"])
    res["diffusion_equals_ar"] = agree["diffusion"] / n
    res["spec_equals_ar"] = agree["spec"] / n
    res["spec_tokens_per_cycle"] = v["tokens"] / max(1, v["denoise_passes"])
    res["tokens_per_s"] = {m: tot[m]["tokens"] / tot[m]["seconds"] for m in MODES if tot[m]["seconds"] > 0}
    res["note"] = "engine, 1 thread, generation time only (clover run's own timer), summed over all examples"
    if ref is not None:
        res["engine_equals_reference"] = {m: ref_agree[m] / n for m in MODES}
    print(json.dumps(res, indent=2))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)
    return res


if __name__ == "__main__":
    main()
