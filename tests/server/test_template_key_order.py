"""Tool schemas and messages reach the chat template in the client's key
order (as Python dicts do), so `tojson` prints exactly what jinja2 prints."""
import json
import sys
import pathlib

import requests

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from chat_template_cases import compile_reference, render_reference, special_tokens  # noqa: E402

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "required": ["zip", "city"],
            "properties": {"zip": {"type": "string"}, "city": {"type": "string", "description": "City"},
                           "units": {"enum": ["c", "f"], "type": "string"}},
        },
        "description": "Weather now",
    },
}]
MESSAGES = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "",
     "tool_calls": [{"type": "function", "id": "call_1",
                     "function": {"name": "get_weather", "arguments": {"zip": "75001", "city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
]


def test_tool_schema_key_order_matches_jinja2(server, tiny_model):
    config = json.loads((tiny_model / "tokenizer_config.json").read_text())
    template = compile_reference(config["chat_template"])
    status, want = render_reference(template, special_tokens(config),
                                    {"messages": MESSAGES, "tools": TOOLS, "add_generation_prompt": True})
    assert status == "ok", want
    # The keys really are out of order, so a sorted dump would differ.
    assert json.dumps(TOOLS[0]) != json.dumps(TOOLS[0], sort_keys=True)
    assert json.dumps(TOOLS[0], ensure_ascii=False) in want
    ids = requests.post(server.url + "/tokenize", json={"messages": MESSAGES, "tools": TOOLS}, timeout=30).json()
    got = requests.post(server.url + "/detokenize", json={"tokens": ids["tokens"]}, timeout=30).json()["prompt"]
    assert got == want
