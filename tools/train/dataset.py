"""Seeded, reproducible examples for clover-tiny, rendered through the Qwen3.5 chat template.

Five task families (issue 5): drone dispatch (JSON list after a short <think> note), parallel
get_weather tool calls then the answer after the tool results, one-word capitals from a fixed
table, arithmetic and list/JSON transformations, and retrieval of a hidden code from filler.

Each example is {"family", "prompt", "answer", "meta"}: `prompt` is the template's render of the
conversation with the generation prompt (ends with "<|im_start|>assistant\n<think>\n"), `answer`
is the rest of the render once the assistant message is added (the think note, "</think>\n\n",
the content, "<|im_end|>"); the loss is on the answer only.

Held-out split: every example has combination keys (an order = drone + task + place, a city pair,
a pair of numbers, a code, a question phrasing); a key whose hash falls in bucket 0 of 10 is held
out. Training examples contain no held-out key, evaluation examples at least one, so evaluation
only sees unseen combinations.

    /usr/bin/python3 -m tools.train.dataset --split train --n 20 --seed 1 --out /tmp/train.jsonl
"""
import argparse
import hashlib
import json
import os
import random

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATE_PATH = os.path.join(ROOT, "assets", "templates", "Qwen3.5.jinja")
FAMILIES = ("drone", "tools", "capital", "math", "retrieval")

# ------------------------------------------------------------------ the chat template (HF settings)

_template = None


def _raise(msg):
    raise jinja2.TemplateError(msg)


def template():
    """Qwen3.5.jinja configured as transformers' apply_chat_template configures jinja2."""
    global _template
    if _template is None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: \
            json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
        env.globals["raise_exception"] = _raise
        with open(TEMPLATE_PATH, encoding="utf-8") as f:
            _template = env.from_string(f.read())
    return _template


def render(messages, tools=None, add_generation_prompt=False, think=True):
    # enable_thinking is left undefined when on, as a client that does not send it renders.
    kw = {} if think else {"enable_thinking": False}
    return template().render(messages=messages, tools=tools, add_generation_prompt=add_generation_prompt,
                             bos_token="", eos_token="<|im_end|>", **kw)


def no_reasoning(message):
    return {k: v for k, v in message.items() if k != "reasoning_content"}


def split_turn(messages, reply, tools=None, think=True):
    """(prompt, answer): the generation-prompt render and what the assistant `reply` adds to it.
    think=False renders with enable_thinking false: the prompt ends with the template's empty think
    block and the answer is the content alone (the reply's reasoning is dropped)."""
    if not think:
        reply = no_reasoning(reply)
    prompt = render(messages, tools, add_generation_prompt=True, think=think)
    full = render(messages + [reply], tools, think=think)
    if not full.startswith(prompt):
        raise ValueError("the template's render of the reply does not extend the generation prompt")
    answer = full[len(prompt):].rstrip("\n")          # the template ends the turn with "<|im_end|>\n"
    assert answer.endswith("<|im_end|>"), answer[-40:]
    return prompt, answer


# ------------------------------------------------------------------ held-out combinations

def held_out(key):
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % 10 == 0


# ------------------------------------------------------------------ data tables

PLACES = ["north field", "south field", "east ridge", "west dock", "river bend", "old quarry", "pine forest",
          "harbor", "airfield", "solar farm", "bridge 3", "dam road", "hill camp", "lake shore", "rail yard",
          "market square", "wind farm", "cargo port", "school yard", "mill creek"]
SITES = ["Clinic 1", "Clinic 2", "Clinic 4", "Field Hospital", "Red Cross Tent", "Village Post", "Station 9",
         "Mountain Hut"]
ITEMS = ["insulin", "blood bags", "vaccines", "bandages", "antivenom", "oxygen"]
TARGETS = ["a lost hiker", "a missing dog", "a stranded boat", "a broken truck", "smoke"]
TASKS = ["mapping", "delivery", "inspection", "search"]

COUNTRIES = {
    "Australia": "Canberra", "France": "Paris", "Japan": "Tokyo", "Canada": "Ottawa", "Brazil": "Brasilia",
    "Egypt": "Cairo", "Kenya": "Nairobi", "Norway": "Oslo", "Portugal": "Lisbon", "Spain": "Madrid",
    "Italy": "Rome", "Germany": "Berlin", "Poland": "Warsaw", "Greece": "Athens", "Turkey": "Ankara",
    "India": "Delhi", "China": "Beijing", "Peru": "Lima", "Chile": "Santiago", "Mexico": "Mexico",
    "Argentina": "Buenos", "Sweden": "Stockholm", "Finland": "Helsinki", "Ireland": "Dublin",
    "Austria": "Vienna", "Hungary": "Budapest", "Morocco": "Rabat", "Nigeria": "Abuja", "Vietnam": "Hanoi",
    "Thailand": "Bangkok", "Switzerland": "Bern", "Belgium": "Brussels", "Netherlands": "Amsterdam",
    "Denmark": "Copenhagen", "Iceland": "Reykjavik", "Cuba": "Havana", "Ghana": "Accra", "Iran": "Tehran",
    "Russia": "Moscow", "Colombia": "Bogota",
}
# Buenos Aires and Mexico City are two words: the one-word table keeps "Buenos" and "Mexico".
CAPITAL_PHRASES = ["What is the capital of {c}? One word.", "Capital of {c}? Answer in one word.",
                   "Name the capital city of {c}. One word only.", "Which city is the capital of {c}? One word.",
                   "{c}: what is its capital? Reply with one word."]

CITIES = ["Lisbon", "Oslo", "Madrid", "Paris", "Berlin", "Rome", "Athens", "Cairo", "Tokyo", "Dublin", "Vienna",
          "Warsaw", "Helsinki", "Stockholm", "Prague", "Lima", "Nairobi", "Toronto", "Sydney", "Denver"]
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
                   "required": ["city"]}}}

FILLER = ["The grass is green and the sky is blue.", "Birds fly over the quiet hills.",
          "A train passes the station every hour.", "The river runs slowly to the sea.",
          "Clouds gather above the mountain in the evening.", "The market opens early on Mondays.",
          "Children play football in the park.", "The old clock in the tower still works.",
          "Rain fell softly on the roofs of the town.", "A cat sleeps on the warm windowsill."]


# ------------------------------------------------------------------ the five families

def drone_example(rng, n_orders, want_held, ctx=None, think=True):
    """A compound dispatch message -> <think> note + JSON list, one object per order."""
    pre, tools = preamble(ctx)
    while True:
        drones = rng.sample(range(1, 40), n_orders)
        orders = []
        for d in drones:
            task = rng.choice(TASKS)
            o = {"drone": f"D-{d:02d}", "task": task}
            if task == "delivery":
                o["target"], o["payload"] = rng.choice(SITES), rng.choice(ITEMS)
            elif task == "search":
                o["target"], o["for"] = rng.choice(PLACES), rng.choice(TARGETS)
            else:
                o["target"] = rng.choice(PLACES)
            orders.append(o)
        keys = [f"drone|{o['drone']}|{o['task']}|{o['target']}" for o in orders]
        if any(map(held_out, keys)) == want_held:
            break
    phr = []
    for o in orders:
        if o["task"] == "mapping":
            phr.append(rng.choice(["drone {d} maps the {t}", "send {d} to map the {t}", "{d}: map the {t}"]))
        elif o["task"] == "delivery":
            phr.append(rng.choice(["drone {d} brings {p} to {t}", "{d} delivers {p} to {t}",
                                   "send {d} with {p} to {t}"]))
        elif o["task"] == "inspection":
            phr.append(rng.choice(["drone {d} inspects the {t}", "{d}: inspect the {t}", "send {d} to inspect the {t}"]))
        else:
            phr.append(rng.choice(["drone {d} searches the {t} for {f}", "{d}: search the {t} for {f}"]))
        phr[-1] = phr[-1].format(d=o["drone"], t=o["target"], p=o.get("payload"), f=o.get("for"))
    opener = rng.choice(["Dispatch orders: ", "Urgent: ", "New tasks. ", "Please dispatch: ", ""])
    user = opener + "; ".join(phr) + ". Reply with the JSON list of orders."
    note = f"{n_orders} order{'s' if n_orders > 1 else ''}: " + ", ".join(o["task"] for o in orders) + "."
    content = json.dumps(orders)
    prompt, answer = split_turn(pre + [{"role": "user", "content": user}],
                                {"role": "assistant", "content": content, "reasoning_content": note}, tools, think)
    return {"family": "drone", "prompt": prompt, "answer": answer,
            "meta": {"orders": orders, "n_orders": n_orders, "keys": keys}}


def tool_examples(rng, want_held, think=True):
    """Two turns: the parallel get_weather calls, then the answer after the tool results."""
    while True:
        a, b = rng.sample(CITIES, 2)
        if held_out(f"cities|{min(a, b)}|{max(a, b)}") == want_held:
            break
    ta, tb = rng.sample(range(-5, 36), 2)
    warm = rng.random() < 0.5
    q = (rng.choice(["Is it warmer in {a} or in {b}?", "Which is warmer right now, {a} or {b}?",
                     "Where is it warmer today: {a} or {b}?"]) if warm else
         rng.choice(["Is it colder in {a} or in {b}?", "Which is colder right now, {a} or {b}?"])).format(a=a, b=b)
    msgs = [{"role": "user", "content": q}]
    calls = [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": c}}} for c in (a, b)]
    call_msg = {"role": "assistant", "content": "", "reasoning_content": f"I need the weather in {a} and {b}.",
                "tool_calls": calls}
    if not think:  # a client with thinking off sends its earlier turns without reasoning too
        call_msg = no_reasoning(call_msg)
    p1, a1 = split_turn(msgs, call_msg, [WEATHER_TOOL], think)
    results = [{"role": "tool", "content": json.dumps({"city": c, "temperature_c": t})} for c, t in ((a, ta), (b, tb))]
    hot, cold = (a, b) if ta > tb else (b, a)
    ht, ct = max(ta, tb), min(ta, tb)
    if warm:
        final = f"It is warmer in {hot} ({ht} °C) than in {cold} ({ct} °C)."
    else:
        final = f"It is colder in {cold} ({ct} °C) than in {hot} ({ht} °C)."
    p2, a2 = split_turn(msgs + [call_msg] + results,
                        {"role": "assistant", "content": final, "reasoning_content": f"{a} {ta}, {b} {tb}."},
                        [WEATHER_TOOL], think)
    meta = {"cities": [a, b], "temps": [ta, tb], "warm": warm}
    return [{"family": "tools", "prompt": p1, "answer": a1, "meta": dict(meta, turn=1)},
            {"family": "tools", "prompt": p2, "answer": a2, "meta": dict(meta, turn=2)}]


def capital_example(rng, want_held, ctx=None, think=True):
    """The facts are a fixed table, all trained; held out are the (country, phrasing) pairs."""
    pre, tools = preamble(ctx)
    while True:
        c, i = rng.choice(sorted(COUNTRIES)), rng.randrange(len(CAPITAL_PHRASES))
        if held_out(f"capital|{c}|{i}") == want_held:
            break
    prompt, answer = split_turn(pre + [{"role": "user", "content": CAPITAL_PHRASES[i].format(c=c)}],
                                {"role": "assistant", "content": COUNTRIES[c], "reasoning_content": f"Capital of {c}."}, tools, think)
    return {"family": "capital", "prompt": prompt, "answer": answer, "meta": {"country": c, "capital": COUNTRIES[c]}}


def math_example(rng, want_held, ctx=None, think=True):
    while True:
        kind = rng.choice(["add", "sub", "mul", "sort", "reverse", "sum", "keys", "double"])
        if kind in ("add", "sub", "mul"):
            x, y = rng.randrange(2, 100 if kind != "mul" else 13), rng.randrange(2, 100 if kind != "mul" else 13)
            sym = {"add": "+", "sub": "-", "mul": "*"}[kind]
            q, a, key = f"What is {x} {sym} {y}?", str({"add": x + y, "sub": x - y, "mul": x * y}[kind]), f"{kind}|{x}|{y}"
        elif kind in ("sort", "reverse", "sum", "double"):
            xs = [rng.randrange(0, 50) for _ in range(rng.randrange(3, 7))]
            q = {"sort": "Sort this list: {l}", "reverse": "Reverse this list: {l}", "sum": "What is the sum of {l}?",
                 "double": "Double every number in {l}"}[kind].format(l=json.dumps(xs))
            a = {"sort": lambda: json.dumps(sorted(xs)), "reverse": lambda: json.dumps(xs[::-1]),
                 "sum": lambda: str(sum(xs)), "double": lambda: json.dumps([2 * v for v in xs])}[kind]()
            key = f"{kind}|{xs}"
        else:
            names = rng.sample(["id", "name", "city", "age", "code", "team", "color", "size"], rng.randrange(2, 5))
            obj = {n: rng.randrange(0, 100) for n in names}
            q, a, key = f"List the keys of this JSON object: {json.dumps(obj)}", json.dumps(names), f"keys|{obj}"
        if held_out(key) == want_held:
            break
    pre, tools = preamble(ctx)
    prompt, answer = split_turn(pre + [{"role": "user", "content": q}],
                                {"role": "assistant", "content": a, "reasoning_content": "Compute."}, tools, think)
    return {"family": "math", "prompt": prompt, "answer": answer, "meta": {"kind": kind, "expected": a}}


def retrieval_example(rng, want_held, n_filler=(8, 24), ctx=None, think=True):
    while True:
        code = f"{rng.choice('ABCDEFGHJKMNPQRSTUVWXYZ')}{rng.randrange(10)}-{rng.randrange(1000, 10000)}"
        if held_out(f"code|{code}") == want_held:
            break
    n = rng.randrange(*n_filler)
    sents = [rng.choice(FILLER) for _ in range(n)]
    sents.insert(rng.randrange(n + 1), f"The secret code is {code}.")
    q = " ".join(sents) + "\n\nWhat is the secret code? Reply with the code only."
    pre, tools = preamble(ctx)
    prompt, answer = split_turn(pre + [{"role": "user", "content": q}],
                                {"role": "assistant", "content": code, "reasoning_content": "Find the code."}, tools, think)
    return {"family": "retrieval", "prompt": prompt, "answer": answer, "meta": {"code": code}}


# ------------------------------------------------------------------ preambles

SYSTEM_PROMPTS = ["You are a helpful assistant.", "You are the dispatch assistant of a drone fleet. Answer precisely.",
                  "Answer briefly and exactly."]


def preamble(ctx):
    """-> (messages before the user's, tools) for a training context. None: a bare user turn (as
    evaluated). ("tools",): the get_weather tools block of the system turn, not needed for the
    answer. ("system", text): a system message. Copying (drone ids, cities) must work wherever the
    user's message sits; trained only on bare turns it failed after the ~230-token tools block."""
    if ctx is None:
        return [], None
    if ctx[0] == "tools":
        return [], [WEATHER_TOOL]
    return [{"role": "system", "content": ctx[1]}], None


def draw_preamble(rng):
    kind = rng.choice(["tools", "tools", "system", "long-system"])
    if kind == "tools":
        return ("tools",)
    if kind == "system":
        return ("system", rng.choice(SYSTEM_PROMPTS))
    return ("system", " ".join(rng.choice(FILLER) for _ in range(rng.randint(10, 30))))


# ------------------------------------------------------------------ mixtures

def generate(n, seed, split="train", max_orders=4, weights=None, preamble_p=0.0, no_think_p=0.0):
    """n examples (tool use counts two turns), reproducible from (seed, split). weights: per family.
    preamble_p: the share of single-turn examples given a preamble (draw_preamble), drawn from a
    separate stream, so the examples themselves are those of preamble_p = 0. no_think_p: the share
    rendered with enable_thinking false (split_turn), from a third stream for the same reason;
    without it the model writes a think note and `</think>` after the template's empty think block."""
    rng = random.Random(f"clover-tiny|{split}|{seed}")
    ctx_rng = random.Random(f"clover-tiny|{split}|{seed}|preamble")
    think_rng = random.Random(f"clover-tiny|{split}|{seed}|no-think")
    want_held = split != "train"
    weights = weights or {"drone": 0.45, "tools": 0.15, "capital": 0.12, "math": 0.16, "retrieval": 0.12}
    fams = list(weights)
    out = []
    while len(out) < n:
        f = rng.choices(fams, [weights[k] for k in fams])[0]
        ctx = draw_preamble(ctx_rng) if f != "tools" and preamble_p > 0 and ctx_rng.random() < preamble_p else None
        think = not (no_think_p > 0 and think_rng.random() < no_think_p)
        if f == "drone":
            out.append(drone_example(rng, rng.randint(1, max_orders), want_held, ctx, think))
        elif f == "tools":
            out.extend(tool_examples(rng, want_held, think))
        elif f == "capital":
            out.append(capital_example(rng, want_held, ctx, think))
        elif f == "math":
            out.append(math_example(rng, want_held, ctx, think))
        else:
            out.append(retrieval_example(rng, want_held, ctx=ctx, think=think))
    return out[:n]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="train", choices=["train", "heldout"])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-orders", type=int, default=4)
    ap.add_argument("--out", help="JSONL output (default: print)")
    ap.add_argument("--corpus", help="also write prompt+answer texts, concatenated, for the BPE trainer")
    a = ap.parse_args()
    ex = generate(a.n, a.seed, a.split, a.max_orders)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            for e in ex:
                f.write(json.dumps(e, ensure_ascii=False) + "\n")
    else:
        for e in ex[:5]:
            print(e["prompt"] + "\x1b[32m" + e["answer"] + "\x1b[0m\n" + "-" * 60)
    if a.corpus:
        with open(a.corpus, "w", encoding="utf-8") as f:
            for e in ex:
                f.write(e["prompt"] + e["answer"] + "\n")


if __name__ == "__main__":
    main()
