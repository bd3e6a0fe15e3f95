"""The newer families through `ingot serve`: the gemma3 and qwen3_5 golden
architectures (small random weights) with their vocabulary widened to the
real Qwen3 tokenizer answer chat completions, streamed and not, and a
repeated long prompt (a prefix-cache hit, which a recurrent state must
match exactly) gives the same greedy answer as the first time."""
import json
import shutil
import struct
import time

import numpy as np
import pytest
import requests
from safetensors.numpy import save_file

from conftest import TOKENIZER, Server, tok_id


def read_f32(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        body = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", name
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(body[a:b], dtype=np.float32).reshape(info["shape"]).copy()
    return out


def widen(golden, tokenizer_dir, dst):
    """The golden checkpoint with embeddings / head resized to the tokenizer's vocabulary."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, dst / name)
    tok = json.loads((tokenizer_dir / "tokenizer.json").read_text())
    n_ids = max([len(tok["model"]["vocab"])] + [t["id"] + 1 for t in tok.get("added_tokens", [])])
    vocab = (n_ids + 127) // 128 * 128
    cfg = json.loads((golden / "config.json").read_text())
    old = cfg["vocab_size"]
    cfg["vocab_size"] = vocab
    tcfg = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())
    cfg["eos_token_id"] = tok_id(tok, tcfg.get("eos_token"))
    cfg["bos_token_id"] = None
    cfg["pad_token_id"] = None
    (dst / "config.json").write_text(json.dumps(cfg))
    rng = np.random.default_rng(0)
    t = read_f32(golden / "model.safetensors")
    for name, a in list(t.items()):
        if a.ndim == 2 and a.shape[0] == old:
            t[name] = (rng.standard_normal((vocab, a.shape[1])) * a.std()).astype(np.float32)
    save_file(t, str(dst / "model.safetensors"))
    return dst


@pytest.fixture(scope="module", params=["gemma3", "qwen3_5"])
def family_server(request, ingot_bin, shared_dir, tmp_path_factory):
    tdir = shared_dir / "assets" / "tokenizers" / TOKENIZER
    golden = shared_dir / "goldens" / f"{request.param}-float32"
    assert (golden / "config.json").exists() and (tdir / "tokenizer.json").exists()
    model = widen(golden, tdir, tmp_path_factory.mktemp(request.param))
    s = Server(ingot_bin, model, "--served-model-name", "m")
    s.family, s.model_dir = request.param, model
    yield s
    s.stop()
    assert s.proc.returncode in (0, -15), "".join(s.output)


def chat(server, text, **extra):
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 8, "temperature": 0, **extra}
    return requests.post(server.url + "/v1/chat/completions", json=body, timeout=120)


def test_chat_completion(family_server):
    r = chat(family_server, "Hello there")
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["choices"][0]["message"]["role"] == "assistant"
    assert j["usage"]["completion_tokens"] > 0
    assert j["usage"]["prompt_tokens"] > 0


def test_streamed_chat_completion(family_server):
    r = chat(family_server, "Count to three", stream=True)
    assert r.status_code == 200, r.text
    events = [l[6:] for l in r.text.splitlines() if l.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert any(json.loads(e)["choices"] and json.loads(e)["choices"][0]["delta"].get("content") for e in events[:-1])


def test_repeated_long_prompt_hits_the_prefix_cache_and_answers_alike(family_server):
    text = "The quick brown fox jumps over the lazy dog, then naps in the warm afternoon sun. " * 3
    a, b = chat(family_server, text), chat(family_server, text)
    assert a.status_code == 200 and b.status_code == 200, a.text + b.text
    assert a.json()["usage"]["prompt_tokens"] % 16 != 0, "the prompt should end inside a block"
    cached = b.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached > 0 and cached % 16 == 0, b.json()["usage"]
    assert b.json()["choices"][0]["message"]["content"] == a.json()["choices"][0]["message"]["content"]
    assert family_server.alive()



def test_prompt_cache_on_disk_survives_a_restart_or_is_off(family_server, ingot_bin, tmp_path):
    """qwen3_5 (recurrent layers) restores an 8 k-token prompt's KV and linear state from disk after a restart
    and answers with the cold run's greedy tokens and logprobs; gemma3's sliding-window layers cannot be
    trimmed back, so it keeps prefixes in RAM only."""
    if family_server.family == "gemma3":
        assert family_server.metrics()["ingot_prompt_cache_disk_enabled"] == 0
        assert "prompt cache: no disk tier (the model has sliding-window layers)" in "".join(family_server.output)
        return
    assert family_server.metrics()["ingot_prompt_cache_disk_enabled"] == 1
    text = "A lighthouse keeper counts the ships that pass the rocky northern cape every single night. " * 475
    args = (family_server.model_dir, "--served-model-name", "m", "--cache-dir", str(tmp_path / "cache"))
    first = Server(ingot_bin, *args, ctx=9000)
    try:
        cold = chat(first, text, logprobs=True)
        deadline = time.time() + 60
        while first.metrics()["ingot_prompt_cache_disk_writes_total"] < 1 and time.time() < deadline:
            time.sleep(0.05)
    finally:
        first.stop()
    second = Server(ingot_bin, *args, ctx=9000)
    try:
        warm = chat(second, text, logprobs=True)
        m = second.metrics()
    finally:
        second.stop()
    assert cold.status_code == 200 and warm.status_code == 200, cold.text + warm.text
    assert cold.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    cached = warm.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached >= 8000 and cached % 16 == 0, warm.json()["usage"]
    assert m['ingot_prefix_cache_hits_total{tier="disk"}'] == 1
    got = [(t["token"], t["logprob"]) for t in warm.json()["choices"][0]["logprobs"]["content"]]
    want = [(t["token"], t["logprob"]) for t in cold.json()["choices"][0]["logprobs"]["content"]]
    assert [t for t, _ in got] == [t for t, _ in want]
    assert all(abs(a - b) <= 2e-3 for (_, a), (_, b) in zip(got, want)), (got, want)
