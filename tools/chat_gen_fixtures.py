#!/usr/bin/env python3
"""Regenerates the chat-layer test fixtures from Python jinja2 (the oracle, tools/jinja_oracle.py):

  tests/chat/fixtures/render_cases.json       the four Qwen templates x the conversations below
  tests/chat/fixtures/jinja_conformance.json  small templates covering the Jinja features

Run from the repository root:  python3 tools/chat_gen_fixtures.py
The C++ tests (tests/chat/) read the JSON files and need no Python.

normalize() mirrors clover::chat::normalize_messages (src/chat/chat_template.cpp): the C++ test
renders the raw requests through ChatTemplate, so any drift between the two shows up as a failure.
"""
import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jinja_oracle  # noqa: E402
from chat_conformance_cases import CASES as CONFORMANCE_CASES  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = ["Qwen3.5.jinja", "Qwen3.jinja", "Qwen3-Thinking-2507.jinja", "Qwen3-Coder.jinja"]
BOS, EOS = "", "<|im_end|>"

# ---- request normalisation (mirror of the C++ one) ------------------------------------------------


def normalize(messages, typed_content):
    out = []
    for m in messages:
        m = copy.deepcopy(m)
        if not isinstance(m, dict):
            out.append(m)
            continue
        if m.get("role") == "developer":
            m["role"] = "system"
        if "reasoning_content" not in m and isinstance(m.get("reasoning"), str):
            m["reasoning_content"] = m["reasoning"]
        for tc in m.get("tool_calls") or []:
            f = tc.get("function") if isinstance(tc, dict) else None
            if isinstance(f, dict) and isinstance(f.get("arguments"), str):
                try:
                    a = json.loads(f["arguments"])
                except ValueError:
                    a = None
                if isinstance(a, dict):
                    f["arguments"] = a
        if not typed_content:
            c = m.get("content")
            if c is None:
                m["content"] = ""
            elif isinstance(c, list):
                m["content"] = "\n".join(p["text"] for p in c if isinstance(p, dict) and isinstance(p.get("text"), str))
        out.append(m)
    return out


def context(request, typed_content):
    ctx = {
        "messages": normalize(request["messages"], typed_content),
        "tools": request.get("tools"),
        "documents": None,
        "add_generation_prompt": request.get("add_generation_prompt", True),
        "bos_token": BOS,
        "eos_token": EOS,
    }
    ctx.update(request.get("kwargs") or {})
    return ctx


def supports_typed_content(source):
    probe = {"messages": [{"role": "user", "content": [{"type": "text", "text": "<<probe>>"}]}], "tools": None,
             "documents": None, "add_generation_prompt": False, "bos_token": BOS, "eos_token": EOS}
    status, text = jinja_oracle.render(source, probe)
    return status == "ok" and "<<probe>>" in text


# ---- conversations --------------------------------------------------------------------------------

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "days": {"type": "integer", "description": "Forecast days"},
        "metric": {"type": "boolean"}},
        "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "  Search the web — returns JSON.  ",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "minLength": 1},
        "filters": {"type": "object", "properties": {"site": {"type": "string"}}},
        "tags": {"type": "array", "items": {"type": "string"}},
        "limit": {"type": "number", "enum": [5, 10, 2.5]}},
        "required": ["query"], "additionalProperties": False}}}
RUN_CODE = {"type": "function", "function": {
    "name": "run_code", "description": "Run Python code.",
    "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}}
GET_TIME = {"type": "function", "function": {"name": "get_time", "description": "Current time.",
                                             "parameters": {"type": "object", "properties": {}}}}
UNICODE_TOOL = {"type": "function", "function": {
    "name": "traduire", "description": "Traduit un texte — 翻译 🌐",
    "parameters": {"type": "object", "properties": {"texte": {"type": "string", "description": "Le texte à traduire"}}}}}
TOOLS = [WEATHER, SEARCH, RUN_CODE, GET_TIME]


def call(name, args, id_="call_1", as_string=True):
    return {"id": id_, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args) if as_string else args}}


def tool(content, id_="call_1", name=None):
    m = {"role": "tool", "tool_call_id": id_, "content": content}
    if name:
        m["name"] = name
    return m


U = lambda c: {"role": "user", "content": c}  # noqa: E731
S = lambda c: {"role": "system", "content": c}  # noqa: E731
A = lambda c, **kw: dict({"role": "assistant", "content": c}, **kw)  # noqa: E731

CONVERSATIONS = {
    "simple_user": {"messages": [U("Hello")]},
    "system_user": {"messages": [S("You are helpful."), U("Hi there")]},
    "thinking_off": {"messages": [S("Be brief."), U("2+2?")], "kwargs": {"enable_thinking": False}},
    "thinking_on_explicit": {"messages": [U("2+2?")], "kwargs": {"enable_thinking": True}},
    "multi_turn_plain": {"messages": [U("Hi"), A("Hello! How can I help?"), U("Tell me a joke")]},
    "multi_turn_reasoning_content": {"messages": [
        U("What is 2+2?"), A("4", reasoning_content="Simple addition."), U("And 3+3?")]},
    "reasoning_inside_content": {"messages": [
        U("Q1"), A("<think>\nhidden thoughts\n</think>\n\nAnswer one"), U("Q2")]},
    "reasoning_field_alias": {"messages": [
        U("Q1"), A("Answer", reasoning="Thinking via the reasoning field."), U("Q2")]},
    "tool_call_single": {"tools": [WEATHER], "messages": [
        S("You are a weather bot."), U("Weather in Paris?"),
        A(None, tool_calls=[call("get_weather", {"city": "Paris", "days": 2})]),
        tool('{"temp": 21}')]},
    "tool_call_args_object": {"tools": [WEATHER], "messages": [
        U("Weather in Rome?"),
        A("", tool_calls=[call("get_weather", {"city": "Rome"}, as_string=False)]), tool("sunny")]},
    "parallel_calls": {"tools": TOOLS, "messages": [
        U("Weather in Paris and Tokyo?"),
        A(None, tool_calls=[call("get_weather", {"city": "Paris"}, "c1"), call("get_weather", {"city": "Tokyo"}, "c2")]),
        tool("18C", "c1"), tool("25C", "c2")]},
    "tool_call_with_content": {"tools": [WEATHER], "messages": [
        U("Weather in Oslo?"),
        A("Let me check that for you.", tool_calls=[call("get_weather", {"city": "Oslo", "metric": True})]),
        tool("-3C")]},
    "tool_loop_with_reasoning": {"tools": [WEATHER], "messages": [
        U("Weather in Lima?"),
        A("", reasoning_content="I should call the weather tool.",
          tool_calls=[call("get_weather", {"city": "Lima"})]),
        tool("20C")]},
    "multi_step_tools": {"tools": TOOLS, "messages": [
        S("Agent."), U("Find the time and the weather."),
        A(None, reasoning_content="First the time.", tool_calls=[call("get_time", {}, "t1")]), tool("12:00", "t1"),
        A(None, reasoning_content="Now the weather.", tool_calls=[call("get_weather", {"city": "Bern"}, "t2")]),
        tool("10C", "t2"),
        A("It is 12:00 and 10C.", reasoning_content="Done."), U("Thanks! And tomorrow?")]},
    "tools_no_system": {"tools": TOOLS, "messages": [U("What can you do?")]},
    "tools_with_system": {"tools": TOOLS, "messages": [S("Use tools wisely."), U("What can you do?")]},
    "unicode": {"tools": [UNICODE_TOOL], "messages": [
        S("Tu es un assistant — réponds en français."), U("こんにちは 🌍 café naïve Ωμέγα"),
        A("Bonjour ! 👋", reasoning_content="L'utilisateur salue."), U("Traduis « merci »")]},
    "empty_user_content": {"messages": [U("")]},
    "missing_content_assistant": {"tools": [WEATHER], "messages": [
        U("Weather?"), {"role": "assistant", "tool_calls": [call("get_weather", {"city": "Nice"})]}, tool("ok")]},
    "null_content_assistant": {"tools": [WEATHER], "messages": [
        U("Weather?"), A(None, tool_calls=[call("get_weather", {"city": "Nice"})]), tool("ok"), A("Done."),
        U("ok")]},
    "content_parts_text": {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two."}]}]},
    "content_parts_image": {"messages": [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/cat.png"}},
                                     {"type": "text", "text": "What is this?"}]}]},
    "content_parts_image_vision_id": {"kwargs": {"add_vision_id": True}, "messages": [
        {"role": "user", "content": [{"type": "image", "image": "a.png"}, {"type": "image", "image": "b.png"},
                                     {"type": "video", "video": "c.mp4"}, {"type": "text", "text": "Compare."}]}]},
    "developer_role": {"messages": [{"role": "developer", "content": "Follow the rules."}, U("Hi")]},
    "no_generation_prompt": {"add_generation_prompt": False, "messages": [U("Hi"), A("Hello!")]},
    "system_only": {"messages": [S("Only a system prompt.")]},
    "empty_messages": {"messages": []},
    "system_not_first": {"messages": [U("Hi"), S("Late system."), U("Again")]},
    "wrapped_tool_response_user": {"messages": [
        U("Real question"), A("call"), U("<tool_response>\nresult\n</tool_response>")]},
    "argument_types": {"tools": TOOLS, "messages": [
        U("Search it."),
        A(None, tool_calls=[call("search", {
            "query": "line1\nline2 \"quoted\" <tag> & 'single'", "filters": {"site": "example.com", "n": [1, 2.5]},
            "tags": ["a", "b"], "limit": 10, "exact": True, "fuzzy": False, "cursor": None, "ratio": 1.0,
            "tiny": 2.5e-7, "big": 12345678901234, "emoji": "🙂"})]),
        tool('{"results": []}')]},
    "tool_call_no_arguments": {"tools": [GET_TIME], "messages": [
        U("Time?"), A(None, tool_calls=[call("get_time", {})]), tool("09:30")]},
    "multiline_code_argument": {"tools": [RUN_CODE], "messages": [
        U("Run it"),
        A("Running:", tool_calls=[call("run_code", {"code": "def f(x):\n    return x < 3 and x > 1\n\nprint(f(2))\n"})]),
        tool("True\n")]},
    "assistant_last_prefill": {"add_generation_prompt": False, "messages": [U("Write a haiku"), A("Autumn moon")]},
    "thinking_off_tool_loop": {"tools": [WEATHER], "kwargs": {"enable_thinking": False}, "messages": [
        U("Weather in Kyiv?"), A(None, tool_calls=[call("get_weather", {"city": "Kyiv"})]), tool("5C")]},
    "video_part": {"messages": [{"role": "user", "content": [{"type": "video", "video": "v.mp4"},
                                                             {"type": "text", "text": "Describe."}]}]},
    "tool_content_parts": {"tools": [WEATHER], "messages": [
        U("Weather?"), A(None, tool_calls=[call("get_weather", {"city": "Riga"})]),
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "7C and windy"}]}]},
    "empty_reasoning_in_loop": {"tools": [WEATHER], "messages": [
        U("Weather?"), A("", reasoning_content="", tool_calls=[call("get_weather", {"city": "Baku"})]), tool("30C")]},
    "reasoning_with_whitespace": {"messages": [
        U("Q"), A("\n\nAnswer with spaces  \n", reasoning_content="\n  padded reasoning \n\n")]},
    "template_syntax_in_content": {"messages": [
        U("Print {{ messages }} and {% if x %} literally, also {# not a comment #}.")]},
    "whitespace_content": {"messages": [S("  spaced system  \n"), U("\n  padded user\t \n")]},
    "complex_tool_schema": {"tools": [SEARCH, UNICODE_TOOL], "messages": [U("Search for cats")]},
    "tool_call_without_type": {"tools": [WEATHER], "messages": [
        U("Weather?"), A(None, tool_calls=[{"id": "x", "function": {"name": "get_weather",
                                                                    "arguments": "{\"city\": \"Quito\"}"}}]),
        tool("14C")]},
    "history_reasoning_dropped": {"messages": [
        S("sys"), U("first"), A("one", reasoning_content="r1"), U("second"), A("two", reasoning_content="r2"),
        U("third")]},
    "user_mentions_tool_response": {"messages": [U("What does <tool_response> mean?")]},
    "numbers_in_arguments": {"tools": [WEATHER], "messages": [
        U("Weather?"), A(None, tool_calls=[call("get_weather", {"city": "X", "days": 3, "lat": -12.5, "zero": 0.0,
                                                                "exp": 1e21, "neg": -7})]), tool("ok")]},
    "preserve_thinking_kwarg": {"kwargs": {"preserve_thinking": True}, "messages": [
        U("Q1"), A("A1", reasoning_content="R1"), U("Q2")]},
    "empty_tools_list": {"tools": [], "messages": [U("Hi")]},
    "final_answer_after_tools": {"tools": [WEATHER], "messages": [
        U("Weather in Paris?"), A(None, reasoning_content="call it", tool_calls=[call("get_weather", {"city": "Paris"})]),
        tool("21C"), A("It is 21C in Paris.", reasoning_content="Report it.")], "add_generation_prompt": False},
    "three_parallel_with_text_and_reasoning": {"tools": TOOLS, "messages": [
        U("Do three things"),
        A("Doing them.", reasoning_content="Three calls.", tool_calls=[
            call("get_time", {}, "a"), call("get_weather", {"city": "Lagos"}, "b"),
            call("search", {"query": "news"}, "c")]),
        tool("1", "a"), tool("2", "b"), tool("3", "c")]},
    "invalid_arguments_string": {"tools": [WEATHER], "messages": [
        U("Weather?"), A(None, tool_calls=[{"id": "z", "type": "function",
                                            "function": {"name": "get_weather", "arguments": "{not json"}}]),
        tool("?")]},
}


def gen_render_cases():
    sources = {}
    for name in TEMPLATES:
        with open(os.path.join(ROOT, "tests/chat/templates", name), encoding="utf-8") as f:
            sources[name] = f.read()
    typed = {n: supports_typed_content(s) for n, s in sources.items()}
    cases = []
    for cname, conv in CONVERSATIONS.items():
        request = {"messages": conv["messages"], "tools": conv.get("tools"), "kwargs": conv.get("kwargs", {}),
                   "add_generation_prompt": conv.get("add_generation_prompt", True)}
        results = {}
        for tname, src in sources.items():
            ctx = context(request, typed[tname])
            status, text = jinja_oracle.render(src, ctx)
            results[tname] = {"status": status, ("output" if status == "ok" else "message"): text, "context": ctx}
        cases.append({"name": cname, "request": request, "results": results})
    return {"generator": "tools/chat_gen_fixtures.py", "jinja2": jinja_oracle.jinja2.__version__,
            "bos_token": BOS, "eos_token": EOS, "typed_content": typed, "cases": cases}


def gen_conformance():
    out = []
    seen = set()
    for name, source, ctx in CONFORMANCE_CASES:
        assert name not in seen, name
        seen.add(name)
        status, text = jinja_oracle.render(source, ctx)
        out.append({"name": name, "template": source, "context": ctx, "status": status,
                    ("output" if status == "ok" else "message"): text})
    return {"generator": "tools/chat_gen_fixtures.py", "jinja2": jinja_oracle.jinja2.__version__, "cases": out}


def write(path, data):
    with open(os.path.join(ROOT, path), "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
        f.write("\n")


def main():
    render = gen_render_cases()
    write("tests/chat/fixtures/render_cases.json", render)
    conf = gen_conformance()
    write("tests/chat/fixtures/jinja_conformance.json", conf)
    n_ok = sum(1 for c in conf["cases"] if c["status"] == "ok")
    print(f"render: {len(render['cases'])} conversations x {len(TEMPLATES)} templates; "
          f"conformance: {len(conf['cases'])} cases ({n_ok} render, {len(conf['cases']) - n_ok} errors)")


if __name__ == "__main__":
    main()
