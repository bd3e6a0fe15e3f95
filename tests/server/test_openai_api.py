"""`ingot serve` driven with the official openai SDK."""
import json

import openai
import pytest
import requests

MSG = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def test_health_and_models(server, client):
    assert requests.get(server.url + "/health", timeout=5).json() == {"status": "ok"}
    models = client.models.list()
    assert len(models.data) == 1 and models.data[0].object == "model"


def test_chat_plain(client):
    r = client.chat.completions.create(messages=MSG, model=client.models.list().data[0].id, max_tokens=8,
                                       temperature=0)
    c = r.choices[0]
    assert r.object == "chat.completion"
    assert c.message.role == "assistant"
    assert isinstance(c.message.content, str)
    assert c.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 0
    assert 0 < r.usage.completion_tokens <= 8
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    if c.finish_reason == "length":
        assert r.usage.completion_tokens == 8


def test_model_may_be_omitted_or_named(server):
    body = {"messages": MSG, "max_tokens": 2}
    assert requests.post(server.url + "/v1/chat/completions", json=body, timeout=30).status_code == 200
    # Any name means the one served model (the strict rule is tested in test_model_names.py).
    r = requests.post(server.url + "/v1/chat/completions", json={**body, "model": "gpt-unknown"}, timeout=30)
    assert r.status_code == 200 and r.json()["model"] == requests.get(server.url + "/v1/models").json()["data"][0]["id"]


def test_greedy_is_deterministic_and_stream_matches(client):
    kw = dict(model="default", messages=MSG, max_tokens=12, temperature=0)
    a = client.chat.completions.create(**kw).choices[0].message.content
    b = client.chat.completions.create(**kw).choices[0].message.content
    assert a == b
    chunks = list(client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == a
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes and finishes[-1] in ("stop", "length")
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0


def test_completions(client):
    r = client.completions.create(model="default", prompt="Once upon a time", max_tokens=6, temperature=0, echo=True)
    assert r.object == "text_completion"
    assert r.choices[0].text.startswith("Once upon a time")
    assert r.choices[0].finish_reason in ("stop", "length")
    ids = client.completions.create(model="default", prompt=[9707, 1879], max_tokens=4, temperature=0)
    assert ids.usage.prompt_tokens == 2
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="default", prompt="Once upon a time", max_tokens=6, temperature=0, stream=True) if c.choices)
    assert r.choices[0].text == "Once upon a time" + streamed


def test_logprobs(client):
    r = client.chat.completions.create(model="default", messages=MSG, max_tokens=4, temperature=0,
                                       logprobs=True, top_logprobs=3)
    lp = r.choices[0].logprobs.content
    assert len(lp) == r.usage.completion_tokens
    for e in lp:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        assert e.top_logprobs[0].logprob >= e.top_logprobs[-1].logprob


def test_tools_are_accepted_and_parsed_shape(client):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "weather",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    with_tools = client.chat.completions.create(model="default", messages=MSG, tools=tools, max_tokens=8,
                                                temperature=0)
    without = client.chat.completions.create(model="default", messages=MSG, max_tokens=8, temperature=0)
    # The template renders the tool list into the prompt.
    assert with_tools.usage.prompt_tokens > without.usage.prompt_tokens
    c = with_tools.choices[0]
    assert c.finish_reason in ("stop", "length", "tool_calls")
    for call in c.message.tool_calls or []:
        assert call.type == "function" and json.loads(call.function.arguments) is not None
    history = MSG + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    r = client.chat.completions.create(model="default", messages=history, tools=tools, max_tokens=4)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_errors_have_openai_shape(server, client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="default", messages=MSG, temperature=7)
    assert e.value.status_code == 400
    body = e.value.body
    assert set(body) >= {"message", "type", "param", "code"} and body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": "x" * 5000}])
    for raw in [b"{not json", b"\xff\xfe\x00", b"[]", b'{"messages": 5}', b'{"messages": [{"role": 1}]}']:
        r = requests.post(server.url + "/v1/chat/completions", data=raw,
                          headers={"Content-Type": "application/json"}, timeout=10)
        assert r.status_code == 400, raw
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    r = requests.post(server.url + "/v1/embeddings", json={"input": [[]]}, timeout=10)
    assert r.status_code == 400 and r.json()["error"]["param"] == "input"


def test_responses_api(client):
    first = client.responses.create(model="default", input="Hello", instructions="Be brief.", max_output_tokens=6)
    assert first.object == "response" and first.status in ("completed", "incomplete")
    assert first.usage.input_tokens > 0
    second = client.responses.create(model="default", input="And again?", previous_response_id=first.id,
                                     max_output_tokens=4)
    assert second.usage.input_tokens > first.usage.input_tokens
    events = [e.type for e in client.responses.create(model="default", input="Hi", max_output_tokens=4, stream=True)]
    assert events[0] == "response.created" and events[-1] in ("response.completed", "response.incomplete")
    assert "response.output_text.delta" in events


def test_tokenize_round_trip(server):
    t = requests.post(server.url + "/tokenize", json={"prompt": "Hello world"}, timeout=10).json()
    assert t["count"] == len(t["tokens"]) > 0
    d = requests.post(server.url + "/detokenize", json={"tokens": t["tokens"]}, timeout=10).json()
    assert d["prompt"] == "Hello world"


def test_metrics_exposition(server, client):
    client.chat.completions.create(model="default", messages=MSG, max_tokens=3)
    m = server.metrics()
    for name in ["ingot_requests_running", "ingot_requests_waiting", "ingot_kv_usage_ratio",
                 "ingot_prefix_cache_hit_rate", "ingot_time_to_first_token_seconds_count",
                 "ingot_time_per_output_token_seconds_count", "ingot_generation_tokens_total"]:
        assert name in m, name
    assert m["ingot_time_to_first_token_seconds_count"] >= 1


def test_engine_step_metrics_account_for_a_request(server, client):
    before = server.metrics()
    r = client.chat.completions.create(model="default", messages=MSG, max_tokens=6, temperature=0)
    after = server.metrics()

    def grew(name):
        return after[name] - before.get(name, 0)

    generated = r.usage.completion_tokens
    # One step per generated token at most (a prefill in chunks adds steps; a draft saves some).
    assert grew("ingot_engine_steps_total") >= 1
    assert grew("ingot_engine_step_tokens_total") >= r.usage.prompt_tokens - r.usage.prompt_tokens_details.cached_tokens
    assert grew("ingot_engine_step_sequences_total") >= grew("ingot_engine_steps_total")
    phases = {p: grew(f'ingot_engine_step_seconds_total{{phase="{p}"}}') for p in ("schedule", "forward", "sample", "emit")}
    assert phases["forward"] > 0 and min(phases.values()) >= 0
    assert generated >= 1
