#!/usr/bin/env python3
"""Reference renderer for chat templates: Python jinja2 configured the way HF transformers'
apply_chat_template configures it (utils/chat_template_utils.py):

  ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                extensions=[AssistantTracker, jinja2.ext.loopcontrols])
  filters["tojson"] = json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...)
  globals raise_exception(msg) and strftime_now(fmt)

It is the oracle for clover's C++ Jinja interpreter (src/chat/jinja/). The fixture generator
tools/chat_gen_fixtures.py imports it; it also works on its own:

  tools/jinja_oracle.py TEMPLATE.jinja CONTEXT.json     # prints the render (or the error, exit 1)
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    """HF's {% generation %} ... {% endgeneration %}: renders its body unchanged here (HF only
    records which characters it produced, for assistant masks)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


class TemplateRaised(Exception):
    """raise_exception() from the template (HF raises jinja2.TemplateError)."""


def _raise_exception(message):
    raise TemplateRaised(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Same as transformers: no HTML-safe escaping, key order kept unless sort_keys.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def make_env(trim_blocks=True, lstrip_blocks=True, now=None):
    env = ImmutableSandboxedEnvironment(
        trim_blocks=trim_blocks,
        lstrip_blocks=lstrip_blocks,
        extensions=[AssistantTracker, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: (now or datetime.now()).strftime(fmt)
    return env


_ENV = make_env()


def render(source, context):
    """Returns ("ok", text), ("raised", message) or ("error", message)."""
    try:
        return "ok", _ENV.from_string(source).render(**context)
    except TemplateRaised as e:
        return "raised", str(e)
    except Exception as e:  # noqa: BLE001 - any jinja2 or Python error is an expected outcome
        return "error", f"{type(e).__name__}: {e}"


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        source = f.read()
    with open(sys.argv[2], encoding="utf-8") as f:
        context = json.load(f)
    status, text = render(source, context)
    if status != "ok":
        print(f"{status}: {text}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
