#!/usr/bin/env python3
"""Writes the golden renderings the chat package is held to.

For every template in a directory (default ../shared/templates) and every
conversation in conversations.json, render the template the way Hugging Face
transformers' apply_chat_template does and write

    golden/<template>.<conversation>.txt      the prompt text, byte for byte
    golden/<template>.<conversation>.refused  "<ExceptionType>: <message>"

The environment mirrors transformers (utils/chat_template_utils.py):
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
loopcontrols extension, a {% generation %} tag rendering its body through a
call block, tojson as json.dumps(ensure_ascii=False, indent, separators,
sort_keys), raise_exception raising TemplateError, and strftime_now. Only the
clock differs: strftime_now reads the fixed "now" of conversations.json so
the goldens do not change from day to day. Templates see messages, tools
(None for a conversation without them), documents=None,
add_generation_prompt, bos_token and eos_token (from the tokens table).

Usage: python3 render.py [TEMPLATE_DIR [OUT_DIR]]   (OUT_DIR defaults to
golden/ beside this script; needs jinja2 >= 3.1, as transformers does;
Debian's python3-jinja2 is enough)
"""

import json
import sys
from datetime import datetime
from pathlib import Path

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = Path(__file__).resolve().parent


class Generation(jinja2.ext.Extension):
    """{% generation %}…{% endgeneration %}: transformers marks assistant
    spans with it; without the mask requested it only renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def make_env(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def tokens_for(name, table):
    for rule in table["by_name"]:
        if rule["contains"] in name:
            return rule["bos"], rule["eos"]
    return table["default"]["bos"], table["default"]["eos"]


def render(env, source, conv, tools, bos, eos):
    """Returns (text, None) or (None, refusal)."""
    try:
        tmpl = env.from_string(source)
        text = tmpl.render(
            messages=conv["messages"],
            tools=tools if conv["tools"] else None,
            documents=None,
            add_generation_prompt=conv["add_generation_prompt"],
            bos_token=bos, eos_token=eos)
        return text, None
    except Exception as exc:  # every failure is the reference refusing
        return None, f"{type(exc).__name__}: {exc}"


def main():
    if tuple(int(p) for p in jinja2.__version__.split(".")[:2]) < (3, 1):
        sys.exit(f"jinja2 {jinja2.__version__} is older than the 3.1 transformers requires")
    template_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "../../../shared/templates"
    spec = json.loads((HERE / "conversations.json").read_text(encoding="utf-8"))
    env = make_env(datetime.fromisoformat(spec["now"]))
    out_dir = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE / "golden"
    out_dir.mkdir(exist_ok=True)
    for old in out_dir.iterdir():
        old.unlink()
    counts = {"rendered": 0, "refused": 0}
    for path in sorted(template_dir.glob("*.jinja")):
        source = path.read_text(encoding="utf-8")
        bos, eos = tokens_for(path.stem, spec["tokens"])
        for conv_name, conv in spec["conversations"].items():
            text, refusal = render(env, source, conv, spec["tools"], bos, eos)
            base = out_dir / f"{path.stem}.{conv_name}"
            if refusal is None:
                base.with_name(base.name + ".txt").write_bytes(text.encode("utf-8"))
                counts["rendered"] += 1
            else:
                base.with_name(base.name + ".refused").write_bytes(refusal.encode("utf-8"))
                counts["refused"] += 1
    print(f"jinja2 {jinja2.__version__}: {counts['rendered']} rendered, {counts['refused']} refused")


if __name__ == "__main__":
    main()
