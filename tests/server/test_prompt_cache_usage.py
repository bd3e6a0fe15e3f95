"""Prompt caching as the APIs report it, read through the official SDKs:
OpenAI usage.prompt_tokens_details.cached_tokens, Anthropic
cache_read_input_tokens / cache_creation_input_tokens (which with
input_tokens add up to the whole prompt)."""
import anthropic
import openai
from conftest import Server

BLOCK = 16  # the prefix cache's block: reuse comes in whole blocks


def long_system(tag: str) -> str:
    return f"[{tag}] " + " ".join(f"Rule {i}: answer briefly and politely." for i in range(20))


def test_openai_reports_cached_tokens_on_a_repeated_prefix(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=60)
    system = {"role": "system", "content": long_system("openai")}
    kw = dict(model="default", temperature=0, max_tokens=4)
    first = client.chat.completions.create(messages=[system, {"role": "user", "content": "Say hi."}], **kw)
    assert first.usage.prompt_tokens > 4 * BLOCK
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    second = client.chat.completions.create(messages=[system, {"role": "user", "content": "Say bye now."}], **kw)
    cached = second.usage.prompt_tokens_details.cached_tokens
    # The shared system prompt is reused (whole blocks), the new question is not.
    assert cached % BLOCK == 0 and 3 * BLOCK <= cached < second.usage.prompt_tokens
    # The streamed answer reports the same, in its usage chunk.
    chunks = list(client.chat.completions.create(messages=[system, {"role": "user", "content": "Say bye now."}],
                                                 stream=True, stream_options={"include_usage": True}, **kw))
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens >= cached


def test_anthropic_reports_cache_reads_and_writes(server):
    client = anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0, timeout=60)
    system = long_system("anthropic")

    def ask(question, stream=False):
        kw = dict(model="default", max_tokens=4, system=system,
                  messages=[{"role": "user", "content": question}])
        if not stream:
            return client.messages.create(**kw)
        with client.messages.stream(**kw) as s:
            return s.get_final_message()

    def total(u):
        return u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens

    first = ask("Say hi.")
    n_first = client.messages.count_tokens(model="default", system=system,
                                           messages=[{"role": "user", "content": "Say hi."}]).input_tokens
    u = first.usage
    assert u.cache_read_input_tokens == 0
    assert u.cache_creation_input_tokens == n_first // BLOCK * BLOCK > 0
    assert total(u) == n_first
    second = ask("Say goodbye to everyone.")
    u2 = second.usage
    assert u2.cache_read_input_tokens % BLOCK == 0 and u2.cache_read_input_tokens >= 3 * BLOCK
    assert u2.input_tokens > 0
    # What the second prompt added beyond the shared prefix is written for the next one.
    assert u2.cache_creation_input_tokens > 0
    # The same request again reads everything that was written, and writes nothing.
    third = ask("Say goodbye to everyone.", stream=True)
    u3 = third.usage
    assert u3.cache_creation_input_tokens == 0
    # (The prompt's last token is always computed, for its logits.)
    written = u2.cache_read_input_tokens + u2.cache_creation_input_tokens
    assert u3.cache_read_input_tokens == min(written, (total(u2) - 1) // BLOCK * BLOCK)
    assert total(u3) == total(u2)


def test_anthropic_cache_control_pins_a_prompt(ingot_bin, tiny_model):
    """With room for two cached prompts, a prompt marked with cache_control survives three unmarked
    ones after it; an unmarked one does not."""
    s = Server(ingot_bin, tiny_model, "--prompt-cache-size", "2", "--no-disk-cache")
    try:
        client = anthropic.Anthropic(base_url=s.url, api_key="none", max_retries=0, timeout=60)

        def ask(tag, marker=None):
            block = {"type": "text", "text": long_system(tag)}
            if marker:
                block["cache_control"] = marker
            return client.messages.create(model="default", max_tokens=1, system=[block],
                                          messages=[{"role": "user", "content": "Hi"}]).usage

        ask("pinned", {"type": "ephemeral", "ttl": "1h"})
        ask("unpinned")
        for i in range(3):
            ask(f"other {i}")
        assert ask("pinned").cache_read_input_tokens > 3 * BLOCK
        assert ask("unpinned").cache_read_input_tokens == 0
        for bad in ({"type": "ephemeral", "ttl": "2d"}, {"type": "persistent"}, "yes"):
            try:
                ask("bad", bad)
                raise AssertionError(f"{bad!r} was accepted")
            except anthropic.BadRequestError as e:
                assert "cache_control" in str(e)
    finally:
        s.stop()
