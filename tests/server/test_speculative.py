"""Speculative decoding through `ingot serve` on the real SmolLM2 Q4_1 GGUF: greedy (and seeded)
output with n-gram drafts equals the output without, token for token, on free prompts and on
input-grounded ones (whose answers copy the prompt, so drafts are long and mostly kept), alone and
in batches that mix requests with and without drafts; the usage of every route and /metrics
report the drafts; stop strings, structured output and streaming are unchanged; bad flags and
fields are clear errors."""
import json
import subprocess
import sys
import pathlib
from concurrent.futures import ThreadPoolExecutor

import anthropic
import openai
import pytest
import requests

from conftest import Server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from grounded_prompts import CODE, DOCUMENT, grounded_tasks  # noqa: E402
from smollm2_prompts import PROMPTS, smollm2_path  # noqa: E402

SHORT_DOC = DOCUMENT[:900]
TASKS = [m for _, m in grounded_tasks(SHORT_DOC, CODE)]


@pytest.fixture(scope="module")
def smol_fixed(ingot_bin):
    """Four draft tokens at every step that has a match, so batches hold drafts too."""
    s = Server(ingot_bin, smollm2_path(), "--speculative", "ngram", "--num-speculative-tokens", "4", ctx=2048)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def smol_default(ingot_bin):
    s = Server(ingot_bin, smollm2_path(), ctx=2048)  # auto: n-gram on the CPU, adaptive
    yield s
    s.stop()


def complete(server, prompt, speculative, max_tokens=32, **extra):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "speculative": speculative, **extra}
    r = requests.post(server.url + "/v1/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def chat(server, content, speculative, max_tokens=48, **extra):
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "temperature": 0,
            "speculative": speculative, **extra}
    r = requests.post(server.url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_free_prompts_equal_in_mixed_batches(smol_fixed):
    """Every prompt with and without speculation, all in flight together."""
    before = smol_fixed.metrics()
    jobs = [(p, spec) for p in PROMPTS[::2] for spec in (True, False)]
    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(lambda j: complete(smol_fixed, *j), jobs))
    drafted = kept = 0
    for i in range(0, len(jobs), 2):
        on, off = outs[i], outs[i + 1]
        assert on["choices"][0]["text"] == off["choices"][0]["text"], jobs[i][0]
        assert on["usage"]["completion_tokens"] == off["usage"]["completion_tokens"]
        assert off["usage"]["completion_tokens_details"] == {"accepted_prediction_tokens": 0,
                                                             "rejected_prediction_tokens": 0}
        d = on["usage"]["completion_tokens_details"]
        kept += d["accepted_prediction_tokens"]
        drafted += d["accepted_prediction_tokens"] + d["rejected_prediction_tokens"]
    assert kept > 0 and drafted > kept
    after = smol_fixed.metrics()
    assert after["ingot_spec_decode_draft_tokens_total"] - before["ingot_spec_decode_draft_tokens_total"] == drafted
    assert after["ingot_spec_decode_accepted_tokens_total"] - before["ingot_spec_decode_accepted_tokens_total"] == kept
    assert after["ingot_spec_decode_drafts_total"] > before["ingot_spec_decode_drafts_total"]


def grounded_drafts(server):
    """Each grounded task with and without drafts: the same answer; (kept, drafted) over all of them."""
    drafted = kept = 0
    for task in TASKS[1:]:
        on, off = chat(server, task, True), chat(server, task, False)
        assert on["choices"][0]["message"]["content"] == off["choices"][0]["message"]["content"], task[:60]
        d = on["usage"]["completion_tokens_details"]
        kept += d["accepted_prediction_tokens"]
        drafted += d["accepted_prediction_tokens"] + d["rejected_prediction_tokens"]
    return kept, drafted


def test_grounded_tasks_equal_and_mostly_kept(smol_fixed):
    kept, drafted = grounded_drafts(smol_fixed)
    # The answers copy the document and the code: most drafted tokens are kept.
    assert kept > 40 and kept > drafted / 2, (kept, drafted)


def test_grounded_tasks_equal_with_adaptive_drafts(smol_default):
    # How many tokens the adaptive length drafts follows the step times it measures, so only
    # the answers are compared here.
    kept, drafted = grounded_drafts(smol_default)
    assert kept <= drafted


def test_seeded_sampling_streaming_and_stop_strings_unchanged(smol_fixed):
    task = TASKS[3]
    sampled = {spec: chat(smol_fixed, task, spec, temperature=0.8, seed=11)["choices"][0]["message"]["content"]
               for spec in (True, False)}
    assert sampled[True] == sampled[False]
    full = chat(smol_fixed, task, False)["choices"][0]["message"]["content"]
    stop = full[len(full) // 2:len(full) // 2 + 6]
    stopped = {spec: chat(smol_fixed, task, spec, stop=[stop]) for spec in (True, False)}
    assert stopped[True]["choices"][0] == stopped[False]["choices"][0]
    assert stopped[True]["choices"][0]["finish_reason"] == "stop"
    client = openai.OpenAI(base_url=smol_fixed.url + "/v1", api_key="none")
    stream = client.chat.completions.create(model="m", temperature=0, max_tokens=48, stream=True,
                                            stream_options={"include_usage": True},
                                            messages=[{"role": "user", "content": task}])
    text, usage = "", None
    for ch in stream:
        if ch.choices:
            text += ch.choices[0].delta.content or ""
        if ch.usage:
            usage = ch.usage
    assert text == full
    assert usage.completion_tokens_details.accepted_prediction_tokens > 0


def test_structured_output_equal(smol_fixed):
    content = "Return this JSON object exactly: " + json.dumps(
        {"board": "Millbrook", "households": 18400, "leakage": [19.3, 16.8], "reservoir": "Eastfield"})
    outs = [chat(smol_fixed, content, spec, max_tokens=64, response_format={"type": "json_object"})
            for spec in (True, False)]
    assert outs[0]["choices"][0]["message"]["content"] == outs[1]["choices"][0]["message"]["content"]
    if outs[0]["choices"][0]["finish_reason"] == "stop":
        json.loads(outs[0]["choices"][0]["message"]["content"])


def test_anthropic_and_responses_usage_report_drafts(smol_fixed):
    task = TASKS[3]
    client = anthropic.Anthropic(base_url=smol_fixed.url, api_key="none")
    r = client.messages.create(model="m", max_tokens=48, messages=[{"role": "user", "content": task}])
    assert r.usage.model_extra["accepted_prediction_tokens"] > 0
    r = requests.post(smol_fixed.url + "/v1/responses", json={"input": task, "max_output_tokens": 48,
                                                              "temperature": 0}, timeout=120).json()
    assert r["usage"]["output_tokens_details"]["accepted_prediction_tokens"] > 0


def test_speculative_field_must_be_a_boolean(smol_fixed):
    r = requests.post(smol_fixed.url + "/v1/chat/completions", timeout=30,
                      json={"messages": [{"role": "user", "content": "hi"}], "speculative": "no"})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "speculative"


@pytest.mark.parametrize("args,message", [
    (["--speculative", "eagle"], "--speculative"),
    (["--num-speculative-tokens", "17"], "--num-speculative-tokens"),
    (["--num-speculative-tokens", "-1"], "--num-speculative-tokens"),
    (["--speculative", "draft"], "needs --draft-model"),
    (["--speculative", "ngram", "--draft-model", str(smollm2_path())], "--draft-model drafts only with"),
])
def test_bad_flags_are_clear_errors(ingot_bin, args, message):
    r = subprocess.run([ingot_bin, "serve", "--model", str(smollm2_path()), "--port", "0", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert message in r.stderr + r.stdout


def test_generate_equal_with_and_without(ingot_bin):
    model = str(smollm2_path())
    outs = [subprocess.run([ingot_bin, "generate", "--model", model, "--chat", "--prompt", TASKS[3], "--max-tokens", "32",
                            *args], capture_output=True, text=True, timeout=120, check=True).stdout
            for args in (["--speculative", "ngram"], ["--speculative", "off"], ["--draft-model", model])]
    assert outs[0] == outs[1] == outs[2] and outs[0].strip()


def test_draft_model_keeps_the_output(ingot_bin, shared_dir):
    """The Q4_1 file drafting for itself: every draft token is kept, the text is unchanged."""
    s = Server(ingot_bin, smollm2_path(), "--draft-model", str(smollm2_path()), ctx=2048)
    try:
        for task in TASKS[3:]:
            on, off = chat(s, task, True, max_tokens=32), chat(s, task, False, max_tokens=32)
            assert on["choices"][0]["message"]["content"] == off["choices"][0]["message"]["content"]
    finally:
        s.stop()
    r = subprocess.run([ingot_bin, "serve", "--model", str(smollm2_path()), "--port", "0", "--draft-model",
                        str(shared_dir / "goldens" / "llama-float32")], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "share the tokenizer" in r.stderr
