"""Whitespace control against jinja2 on randomly built (valid) templates.

trim_blocks, lstrip_blocks and the -/+ tag modifiers decide most of a chat
prompt's bytes; these templates mix them with text full of spaces, tabs and
newlines, comments, raw blocks, loops and conditionals. Deterministic seed.
"""
import json
import os
import random
import subprocess

from chat_template_cases import compile_reference

COUNT = int(os.environ.get("INGOT_TEMPLATE_FUZZ_COUNT", "150"))
TEXTS = ["", " ", "  ", "\n", "\t", " \n ", "a", "b c", "\n\n", "x\n  ", "  \t\n", "\n  y", "é ", " 🎉\n"]


def _mod(rng, allow_plus=True):
    return rng.choice(["", "", "-", "+"] if allow_plus else ["", "", "-"])


def _block(rng, body):
    return "{%" + _mod(rng) + " " + body + " " + _mod(rng) + "%}"


def _node(rng, depth):
    r = rng.random()
    if r < 0.35 or depth > 3:
        return rng.choice(TEXTS)
    if r < 0.5:
        return "{{" + _mod(rng, False) + " " + rng.choice(["v", "'s p'", "n + 1", "items | length", "u"]) + " " + \
            _mod(rng, False) + "}}"
    if r < 0.58:
        return "{#" + _mod(rng) + " note " + _mod(rng) + "#}"
    if r < 0.62:
        raw_begin = "{%" + _mod(rng) + " raw " + _mod(rng, False) + "%}"  # jinja2 has no `+%}` after raw
        return raw_begin + rng.choice(TEXTS) + "{{ kept }}" + _block(rng, "endraw")
    if r < 0.8:
        out = _block(rng, rng.choice(["if c", "if not c", "if n > 1"])) + _nodes(rng, depth + 1)
        if rng.random() < 0.5:
            out += _block(rng, "else") + _nodes(rng, depth + 1)
        return out + _block(rng, "endif")
    if r < 0.93:
        return _block(rng, "for i in items") + _nodes(rng, depth + 1) + _block(rng, "endfor")
    if r < 0.96:
        return _block(rng, rng.choice(["set v = 'w'", "set v = v ~ 'x'", "set n = n + 1"])) + rng.choice(TEXTS)
    return _block(rng, "macro m(a=1)") + _nodes(rng, depth + 1) + _block(rng, "endmacro") + "{{ m() }}"


def _nodes(rng, depth):
    return "".join(_node(rng, depth) for _ in range(rng.randint(1, 4)))


def test_whitespace_control_matches_jinja2(ingot_bin, tmp_path):
    rng = random.Random(int(os.environ.get("INGOT_TEMPLATE_FUZZ_SEED", "20240601")))
    context = {"v": "V", "n": 2, "c": True, "items": [1, 2], "messages": []}
    checked = 0
    for k in range(COUNT):
        source = rng.choice(TEXTS) + _nodes(rng, 0) + rng.choice(["", "\n", " \n"])
        context["c"] = rng.random() < 0.5
        expected = compile_reference(source).render(**context)
        model = tmp_path / str(k)
        model.mkdir()
        (model / "chat_template.jinja").write_text(source)
        got = subprocess.run([ingot_bin, "chat-template", "--model", str(model)],
                             input=json.dumps(context).encode(), capture_output=True, timeout=60)
        assert got.returncode == 0, f"template {source!r}: {got.stderr.decode()}"
        assert got.stdout.decode() == expected, f"template {source!r}\nexpected {expected!r}\ngot {got.stdout.decode()!r}"
        checked += 1
    assert checked == COUNT
