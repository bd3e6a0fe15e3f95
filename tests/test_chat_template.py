"""`ingot chat-template` against jinja2 set up as transformers sets it up.

Every template (the three real tokenizers in shared/assets/tokenizers and the
fixtures in tests/data/templates) renders >= 50 generated conversations;
the output must be byte-identical, and where the reference raises (e.g.
raise_exception for an unsupported message order) ingot must fail with the
same message.
"""
import json
import pathlib
import subprocess

import pytest

from chat_template_cases import compile_reference, conversations, render_reference, special_tokens

DATA = pathlib.Path(__file__).resolve().parent / "data" / "templates"
SHARED_TOKENIZERS = ["qwen3", "llama3_1", "gemma3"]
CONVERSATIONS = 80
MIN_RENDERED = 50


def fixture_names():
    return sorted(p.stem for p in DATA.glob("*.jinja"))


def run_ingot(ingot_bin, model_dir, request, extra_args=()):
    return subprocess.run([ingot_bin, "chat-template", "--model", str(model_dir), *extra_args],
                          input=json.dumps(request, ensure_ascii=False).encode(), capture_output=True, timeout=60)


def run_batch(ingot_bin, model_dir, requests):
    got = subprocess.run([ingot_bin, "chat-template", "--model", str(model_dir), "--batch"],
                         input=json.dumps(requests, ensure_ascii=False).encode(), capture_output=True, timeout=120)
    assert got.returncode == 0, got.stderr.decode()
    results = json.loads(got.stdout)
    assert len(results) == len(requests)
    return results


SINGLE_CALLS = 4  # conversations also run through the one-request-per-process contract


def check_template(ingot_bin, model_dir, source, tokens, seed):
    template = compile_reference(source)
    requests = conversations(seed, CONVERSATIONS)
    results = run_batch(ingot_bin, model_dir, requests)
    rendered = 0
    for k, (request, result) in enumerate(zip(requests, results)):
        status, expected = render_reference(template, tokens, request)
        where = f"{model_dir} conversation {k}: {json.dumps(request, ensure_ascii=False)[:300]}"
        if status == "ok":
            assert "prompt" in result, f"{where}\ningot failed: {result}"
            assert result["prompt"] == expected, f"{where}\nexpected:\n{expected!r}\ngot:\n{result['prompt']!r}"
            rendered += 1
        else:
            assert "error" in result, f"{where}\nreference raised {expected!r} but ingot rendered"
            if status == "raised":
                assert expected in result["error"], f"{where}\nreference raised {expected!r}, ingot said {result}"
        if k < SINGLE_CALLS:
            got = run_ingot(ingot_bin, model_dir, request)
            if status == "ok":
                assert got.returncode == 0 and got.stdout.decode() == expected, f"{where}\n{got.stderr.decode()}"
            else:
                err = got.stderr.decode()
                assert got.returncode != 0 and err.startswith("ingot: error: ") and err.count("\n") == 1, err
    assert rendered >= MIN_RENDERED, f"only {rendered} of {CONVERSATIONS} conversations rendered for {model_dir}"


@pytest.mark.parametrize("name", SHARED_TOKENIZERS)
def test_shared_tokenizer_templates(ingot_bin, shared_dir, name):
    model_dir = shared_dir / "assets" / "tokenizers" / name
    config = json.loads((model_dir / "tokenizer_config.json").read_text())
    check_template(ingot_bin, model_dir, config["chat_template"], special_tokens(config), seed=sum(map(ord, name)))


def _fixture_dir(tmp_path, name):
    tokens = json.loads((DATA / "tokens.json").read_text())
    family = next((v for k, v in tokens["families"].items() if name.startswith(k)), tokens["default"])
    source = (DATA / f"{name}.jinja").read_text()
    config = dict(family)
    config["chat_template"] = source
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    return tmp_path, source, special_tokens(config)


def test_fixture_count():
    assert len(fixture_names()) >= 8, "expected the fixture templates in tests/data/templates"


@pytest.mark.parametrize("name", fixture_names())
def test_fixture_templates(ingot_bin, tmp_path, name):
    model_dir, source, tokens = _fixture_dir(tmp_path, name)
    check_template(ingot_bin, model_dir, source, tokens, seed=sum(map(ord, name)))


def test_chat_template_jinja_file_wins(ingot_bin, tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "config", "eos_token": "</s>"}))
    (tmp_path / "chat_template.jinja").write_text("{{ messages[0].content }}{{ eos_token }}\n")
    got = run_ingot(ingot_bin, tmp_path, {"messages": [{"role": "user", "content": "hi"}]})
    assert got.returncode == 0 and got.stdout == b"hi</s>"


def test_named_templates_and_added_token_dicts(ingot_bin, tmp_path):
    config = {
        "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": False},
        "chat_template": [{"name": "default", "template": "D{{ bos_token }}"},
                          {"name": "tool_use", "template": "T{{ tools | length }}"}],
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    plain = run_ingot(ingot_bin, tmp_path, {"messages": []})
    tools = run_ingot(ingot_bin, tmp_path, {"messages": [], "tools": [{"type": "function"}]})
    named = run_ingot(ingot_bin, tmp_path, {"messages": [], "tools": []}, ["--template", "tool_use"])
    unknown = run_ingot(ingot_bin, tmp_path, {"messages": []}, ["--template", "rag"])
    assert (plain.stdout, tools.stdout, named.stdout) == (b"D<s>", b"T1", b"T0")
    assert unknown.returncode != 0 and "no chat template named 'rag'" in unknown.stderr.decode()


def test_missing_template_is_a_clear_error(ingot_bin, shared_dir):
    got = run_ingot(ingot_bin, shared_dir / "assets" / "tokenizers" / "mistral-7b", {"messages": []})
    assert got.returncode != 0
    assert "has no chat template" in got.stderr.decode()


@pytest.mark.parametrize("bad", ["not json", "[]", '{"messages": 3}', '{"add_generation_prompt": true}'])
def test_bad_requests(ingot_bin, shared_dir, bad):
    got = subprocess.run([ingot_bin, "chat-template", "--model", str(shared_dir / "assets" / "tokenizers" / "qwen3")],
                         input=bad.encode(), capture_output=True, timeout=60)
    assert got.returncode != 0 and got.stderr.decode().count("\n") == 1


def test_raise_exception_message(ingot_bin, shared_dir):
    request = {"messages": [{"role": "assistant", "content": "first"}]}
    got = run_ingot(ingot_bin, shared_dir / "assets" / "tokenizers" / "gemma3", request)
    assert got.returncode != 0
    assert "Conversation roles must alternate user/assistant/user/assistant/..." in got.stderr.decode()
