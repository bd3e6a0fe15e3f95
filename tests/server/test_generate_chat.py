"""`ingot generate --chat`: the prompt is the chat template's rendering of one
user turn (as jinja2 renders it), tokenized without extra special tokens."""
import json
import subprocess

import jinja2
from tokenizers import Tokenizer


def render_reference(model_dir, user):
    cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False)
    tmpl = env.from_string(cfg["chat_template"])
    return tmpl.render(messages=[{"role": "user", "content": user}], add_generation_prompt=True,
                       eos_token=cfg.get("eos_token"), bos_token=cfg.get("bos_token"))


def test_chat_prompt_matches_template_and_tokenizer(ingot_bin, tiny_model):
    text = render_reference(tiny_model, "What is 2+2?")
    ids = Tokenizer.from_file(str(tiny_model / "tokenizer.json")).encode(text, add_special_tokens=False).ids
    by_ids = subprocess.run([ingot_bin, "generate", "--model", str(tiny_model), "--prompt-ids", ",".join(map(str, ids)),
                             "--max-tokens", "6", "--ignore-eos"], capture_output=True, text=True, timeout=120)
    assert by_ids.returncode == 0, by_ids.stderr
    expected = Tokenizer.from_file(str(tiny_model / "tokenizer.json")).decode(
        [int(x) for x in by_ids.stdout.strip().split(",")], skip_special_tokens=True)
    chat = subprocess.run([ingot_bin, "generate", "--model", str(tiny_model), "--chat", "--prompt", "What is 2+2?",
                           "--max-tokens", "6", "--ignore-eos"], capture_output=True, text=True, timeout=120)
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout.rstrip("\n") == expected


def test_chat_without_prompt_is_an_error(ingot_bin, tiny_model):
    r = subprocess.run([ingot_bin, "generate", "--model", str(tiny_model), "--chat", "--prompt-ids", "1,2"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "--chat" in r.stderr
