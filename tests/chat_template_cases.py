"""Reference chat-template rendering and deterministic test conversations.

The reference is jinja2 configured the way transformers' apply_chat_template
configures it: an ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks, the loop-controls extension, a pass-through {% generation %}
tag, tojson without HTML escaping (ensure_ascii=False, indent, separators,
sort_keys), raise_exception and strftime_now; variables are the tokenizer's
special tokens, messages, tools and documents (None unless given),
add_generation_prompt and any extra keyword arguments.
"""
import json
import random
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class _Generation(Extension):
    """{% generation %}...{% endgeneration %} renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_passthrough")
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _passthrough(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.now().strftime(fmt)


def compile_reference(source):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(source)


def special_tokens(config):
    """bos_token, eos_token, ... of a tokenizer_config.json (AddedToken dicts reduced to content)."""
    out = {}
    for key in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"):
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    extra = config.get("additional_special_tokens")
    if isinstance(extra, list):
        out["additional_special_tokens"] = [t["content"] if isinstance(t, dict) else t for t in extra]
    return out


def render_reference(template, tokens, request):
    """("ok", text), ("raised", message) for raise_exception, or ("error", description) for any other
    failure, as apply_chat_template(tokenize=False) would give."""
    ctx = dict(tokens)
    ctx.update({"tools": None, "documents": None, "add_generation_prompt": False})
    ctx.update(request)
    try:
        return "ok", template.render(**ctx)
    except Exception as e:  # noqa: BLE001 - any failure inside the template is an outcome to compare
        if type(e) is jinja2.exceptions.TemplateError:
            return "raised", str(e)
        return "error", f"{type(e).__name__}: {e}"


# ---- deterministic conversations ------------------------------------------------

_TEXTS = [
    "Hello!",
    "What is the capital of France?",
    "  leading and trailing spaces  ",
    "Line one\nLine two\n\nLine four",
    "Tabs\tand\ttabs, CRLF\r\nend",
    "Unicode: naïve café, 日本語のテキスト, русский, العربية, हिन्दी",
    "Emoji 👩‍👩‍👧‍👦 and 🇫🇷 flags 🎉",
    'Quotes "double" and \'single\' and `back`',
    "Braces {{ not a tag }} and {% neither %} and {# nor #}",
    "JSON-ish: {\"a\": [1, 2, 3], \"b\": null}",
    "Special tokens in text: <|im_start|> <|eot_id|> <start_of_turn> [INST] </s>",
    "Numbers 3.14159 and 1e-5 and -42",
    "",
    "A longer paragraph. " * 8,
    "Backslashes \\n \\t \\\\ and a trailing newline\n",
]

_SYSTEMS = [
    "You are a helpful assistant.",
    "You are a pirate. Answer in pirate speak.\nKeep answers short.",
    "Système: réponds en français. 答えは日本語で。",
    "",
]

_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. Zürich"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "max_results": {"type": "integer", "default": 5}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression like \"2 * (3 + 4)\"",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
        },
    },
]


def _call_id(rng):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(9))


def _text(rng):
    return rng.choice(_TEXTS)


def _assistant(rng, thinking):
    text = _text(rng) or "OK."
    if thinking and rng.random() < 0.5:
        return {"role": "assistant", "content": f"<think>\nLet me think about it. {_text(rng)}\n</think>\n\n{text}"}
    msg = {"role": "assistant", "content": text}
    if thinking and rng.random() < 0.3:
        msg["reasoning_content"] = "Reasoning: " + _text(rng)
    return msg


def _tool_exchange(rng, tools):
    n_calls = 1 if rng.random() < 0.7 else 2
    calls, results = [], []
    for _ in range(n_calls):
        tool = rng.choice(tools)["function"]
        name = tool["name"]
        args = {"city": "Paris", "unit": "celsius"} if name == "get_weather" else (
            {"query": "jinja2 whitespace control", "max_results": 3} if name == "search" else {"expression": "2 * (3 + 4)"})
        cid = _call_id(rng)
        if rng.random() < 0.25:  # OpenAI clients send arguments as a JSON string
            args = json.dumps(args)
        calls.append({"id": cid, "type": "function", "function": {"name": name, "arguments": args}})
        results.append({"role": "tool", "tool_call_id": cid, "name": name,
                        "content": rng.choice(['{"temperature": 21, "sky": "clear"}', "14", "No results found."])})
    content = rng.choice(["", "Let me check that.", None])
    return [{"role": "assistant", "content": content, "tool_calls": calls}] + results


def conversations(seed, count):
    """`count` varied chat requests, the same for a given seed."""
    rng = random.Random(seed)
    out = []
    for k in range(count):
        kind = k % 5  # plain, with system, tools, tool calls, thinking
        use_tools = kind in (2, 3)
        thinking = kind == 4 or rng.random() < 0.2
        messages = []
        if kind == 1 or rng.random() < 0.3:
            messages.append({"role": "system", "content": rng.choice(_SYSTEMS)})
        turns = rng.randint(1, 3)
        for t in range(turns):
            if rng.random() < 0.05:  # multimodal-style content parts
                messages.append({"role": "user", "content": [{"type": "text", "text": _text(rng) or "Hi"}]})
            else:
                messages.append({"role": "user", "content": _text(rng) or "Hi"})
            last = t == turns - 1
            if kind == 3 and (last or rng.random() < 0.5):
                messages.extend(_tool_exchange(rng, _TOOLS))
                if not last or rng.random() < 0.5:
                    messages.append(_assistant(rng, thinking))
            elif not last or rng.random() < 0.4:
                messages.append(_assistant(rng, thinking))
        request = {"messages": messages, "add_generation_prompt": rng.random() < 0.7}
        if use_tools:
            request["tools"] = _TOOLS[: rng.randint(1, len(_TOOLS))]
        if thinking or rng.random() < 0.3:
            request["enable_thinking"] = rng.random() < 0.5
        if rng.random() < 0.2:
            request["date_string"] = "26 Jul 2024"
        out.append(request)
    return out
