"""Concurrency, cancellation, queue limits and API keys on a real `ingot serve`."""
import concurrent.futures
import time

import openai
import pytest
import requests

from conftest import Server

PROMPTS = [f"Story number {i}: once there was a" for i in range(32)]


def test_32_streams_match_sequential_greedy(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=120)
    kw = dict(model="default", max_tokens=12, temperature=0)
    sequential = [client.completions.create(prompt=p, **kw).choices[0].text for p in PROMPTS]

    def streamed(p):
        return "".join(c.choices[0].text for c in client.completions.create(prompt=p, stream=True, **kw) if c.choices)

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        parallel = list(pool.map(streamed, PROMPTS))
    assert parallel == sequential


@pytest.fixture(scope="module")
def small_server(ingot_bin, tiny_model):
    # No prefix cache, so a freed request leaves no blocks behind; one sequence, one waiting.
    s = Server(ingot_bin, tiny_model, "--prompt-cache-size", "0", "--max-concurrency", "1", "--max-queue", "1",
               "--api-key", "sekrit")
    yield s
    s.stop()


def metrics(s):
    text = requests.get(s.url + "/metrics", headers={"Authorization": "Bearer sekrit"}, timeout=10).text
    return {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l and l[0] != "#"}


def test_closing_a_stream_frees_its_kv(small_server):
    client = openai.OpenAI(base_url=small_server.url + "/v1", api_key="sekrit", max_retries=0, timeout=60)
    base = metrics(small_server)["ingot_kv_blocks_used"]
    stream = client.chat.completions.create(model="default", messages=[{"role": "user", "content": "Go on."}],
                                            max_tokens=400, temperature=0, stream=True)
    got = 0
    for chunk in stream:
        got += 1
        if got == 4:
            break
    assert metrics(small_server)["ingot_requests_running"] >= 0
    stream.close()
    deadline = time.time() + 3
    while time.time() < deadline:
        m = metrics(small_server)
        if m["ingot_requests_running"] == 0 and m["ingot_kv_blocks_used"] == base:
            break
        time.sleep(0.05)
    assert m["ingot_requests_running"] == 0 and m["ingot_kv_blocks_used"] == base, m
    assert m.get('ingot_request_finish_total{reason="length"}', 0) == 0


def test_past_the_queue_limit_is_429(small_server):
    client = openai.OpenAI(base_url=small_server.url + "/v1", api_key="sekrit", max_retries=0, timeout=60)
    stream = client.chat.completions.create(model="default", messages=[{"role": "user", "content": "Go on."}],
                                            max_tokens=400, stream=True)
    next(iter(stream))

    def one(_):
        try:
            client.chat.completions.create(model="default", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
            return 200
        except openai.RateLimitError as e:
            return e.status_code
    # One decodes, one may wait; the rest are turned away at once.
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(one, i) for i in range(3)]
        deadline = time.time() + 10
        while time.time() < deadline and not any(f.done() for f in futures):
            time.sleep(0.02)
        stream.close()
        codes = [f.result(timeout=60) for f in futures]
    assert 429 in codes and 200 in codes, codes


def test_api_key_on_every_route_but_health(small_server):
    assert requests.get(small_server.url + "/health", timeout=5).status_code == 200
    for path in ["/v1/models", "/metrics"]:
        assert requests.get(small_server.url + path, timeout=5).status_code == 401
    bad = openai.OpenAI(base_url=small_server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
