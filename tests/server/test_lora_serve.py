"""LoRA adapters in `ingot serve`: --lora NAME=PATH selects by `model`, one
batch mixing three adapters and the base answers as each alone, an adapter
equals its merged model, the prefix cache never crosses adapters, run-time
load / unload (refused without --api-key unless --allow-runtime-lora), the
--max-loras LRU and bad adapters that leave the server serving."""
import concurrent.futures as cf
import json
import pathlib
import sys

import pytest
import requests
from safetensors.numpy import load_file, save_file

from conftest import Server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
import lora_adapters as la  # noqa: E402

PROMPT = [int(x) for x in "791 3974 13876 38835 34208 916 279 15678 5562 13 576 6157 374".split()]
LONG = PROMPT * 4  # 52 tokens: three full 16-token prefix blocks


@pytest.fixture(scope="module")
def adapters(tiny_model, tmp_path_factory):
    t = load_file(str(tiny_model / "model.safetensors"))
    root = tmp_path_factory.mktemp("loras")
    out = {}
    for i, name in enumerate(["a", "b", "c"]):
        pairs = la.random_pairs(t, rank=4, seed=10 + i, std=0.4)
        out[name] = (la.write_peft(root / name, pairs, rank=4, alpha=8), pairs)
    return out


@pytest.fixture(scope="module")
def lora_server(ingot_bin, tiny_model, adapters):
    flags = [f for n, (p, _) in adapters.items() for f in ("--lora", f"{n}={p}")]
    s = Server(ingot_bin, tiny_model, *flags, "--max-concurrency", "8")
    yield s
    s.stop()
    assert s.proc.returncode in (0, -15), "".join(s.output)


def complete(server, model, prompt=PROMPT, n=12):
    r = requests.post(server.url + "/v1/completions", json={
        "model": model, "prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def text(server, model, **kw):
    return complete(server, model, **kw)["choices"][0]["text"]


def test_models_lists_base_and_adapters(lora_server, adapters):
    data = requests.get(lora_server.url + "/v1/models", timeout=10).json()["data"]
    ids = [m["id"] for m in data]
    assert ids[1:] == ["a", "b", "c"]
    assert all(m["parent"] == ids[0] for m in data[1:])
    one = requests.get(lora_server.url + "/v1/models/b", timeout=10).json()
    assert one["id"] == "b" and one["root"] == str(adapters["b"][0])


def test_mixed_batch_equals_each_alone(lora_server):
    names = ["a", "b", "c", "base"]
    alone = {n: text(lora_server, n) for n in names}
    assert len(set(alone.values())) == 4, alone  # every adapter changes the answer
    with cf.ThreadPoolExecutor(8) as pool:
        futs = [(n, pool.submit(text, lora_server, n)) for n in names * 2]
        for n, f in futs:
            assert f.result() == alone[n], n


def test_adapter_equals_merged_model(ingot_bin, lora_server, adapters, tiny_model, tmp_path):
    merged = tmp_path / "merged"
    merged.mkdir()
    for f in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        (merged / f).write_bytes((tiny_model / f).read_bytes())
    t = load_file(str(tiny_model / "model.safetensors"))
    save_file(la.merged(t, adapters["b"][1], 8 / 4), str(merged / "model.safetensors"))
    s = Server(ingot_bin, merged)
    try:
        assert text(s, "x") == text(lora_server, "b")
    finally:
        s.stop()


def hit_tokens(server):
    return server.metrics()["ingot_prefix_cache_hit_tokens_total"]


def test_prefix_cache_keyed_on_adapter(ingot_bin, tiny_model, adapters):
    flags = [f for n, (p, _) in adapters.items() for f in ("--lora", f"{n}={p}")]
    fresh = Server(ingot_bin, tiny_model, *flags, "--prompt-cache-size", "0")
    try:
        want = {n: text(fresh, n, prompt=LONG) for n in ("base", "a", "b")}
    finally:
        fresh.stop()
    s = Server(ingot_bin, tiny_model, *flags)
    try:
        assert text(s, "base", prompt=LONG) == want["base"]
        before = hit_tokens(s)
        # Same tokens under adapters: no reuse of the base model's K/V.
        assert text(s, "a", prompt=LONG) == want["a"]
        assert text(s, "b", prompt=LONG) == want["b"]
        assert hit_tokens(s) == before
        # Each scope reuses its own prefix.
        assert text(s, "a", prompt=LONG) == want["a"]
        assert hit_tokens(s) == before + 48
        assert text(s, "base", prompt=LONG) == want["base"]
        assert hit_tokens(s) == before + 96
    finally:
        s.stop()


def test_runtime_load_refused_without_key(lora_server, adapters):
    r = requests.post(lora_server.url + "/v1/load_lora_adapter",
                      json={"lora_name": "d", "lora_path": str(adapters["a"][0])}, timeout=10)
    assert r.status_code == 403 and "--api-key" in r.json()["error"]["message"]
    r = requests.post(lora_server.url + "/v1/unload_lora_adapter", json={"lora_name": "a"}, timeout=10)
    assert r.status_code == 403
    assert "a" in [m["id"] for m in requests.get(lora_server.url + "/v1/models", timeout=10).json()["data"]]


def test_runtime_load_unload_and_bad_adapters(ingot_bin, tiny_model, adapters, tmp_path):
    key = {"Authorization": "Bearer k"}
    s = Server(ingot_bin, tiny_model, "--api-key", "k")
    try:
        url = s.url
        body = {"lora_name": "d", "lora_path": str(adapters["a"][0])}
        assert requests.post(url + "/v1/load_lora_adapter", json=body, timeout=10).status_code == 401
        r = requests.post(url + "/v1/load_lora_adapter", json=body, headers=key, timeout=10)
        assert r.status_code == 200, r.text
        assert "d" in [m["id"] for m in requests.get(url + "/v1/models", headers=key, timeout=10).json()["data"]]
        r = requests.post(url + "/v1/load_lora_adapter", json=body, headers=key, timeout=10)
        assert r.status_code == 400 and "already loaded" in r.json()["error"]["message"]
        # Bad adapters: a clear 4xx, nothing registered, the server keeps serving.
        bad_rank = la.write_peft(tmp_path / "r", la.random_pairs(load_file(str(tiny_model / "model.safetensors")),
                                                                  rank=128, targets=["q_proj"]), rank=128, alpha=8)
        for path, status, needle in [(tmp_path / "none", 404, "not found"),
                                     (bad_rank, 400, "above the limit 64"),
                                     (tmp_path / "r" / "adapter_config.json", 404, "not found")]:
            r = requests.post(url + "/v1/load_lora_adapter", json={"lora_name": "bad", "lora_path": str(path)},
                              headers=key, timeout=10)
            assert r.status_code == status and needle in r.json()["error"]["message"], r.text
        r = requests.post(url + "/v1/load_lora_adapter", json={"lora_name": "bad"}, headers=key, timeout=10)
        assert r.status_code == 400
        assert "bad" not in [m["id"] for m in requests.get(url + "/v1/models", headers=key, timeout=10).json()["data"]]
        r = requests.post(url + "/v1/completions", json={"model": "d", "prompt": PROMPT, "max_tokens": 4,
                                                         "temperature": 0}, headers=key, timeout=30)
        assert r.status_code == 200
        want = r.json()["choices"][0]["text"]
        r = requests.post(url + "/v1/unload_lora_adapter", json={"lora_name": "d"}, headers=key, timeout=10)
        assert r.status_code == 200
        r = requests.post(url + "/v1/unload_lora_adapter", json={"lora_name": "d"}, headers=key, timeout=10)
        assert r.status_code == 404
        assert len(requests.get(url + "/v1/models", headers=key, timeout=10).json()["data"]) == 1
        assert want and s.alive()
    finally:
        s.stop()


def test_allow_runtime_lora_and_max_loras_lru(ingot_bin, tiny_model, adapters):
    s = Server(ingot_bin, tiny_model, "--allow-runtime-lora", "--max-loras", "1")
    try:
        for n in ("a", "b"):
            r = requests.post(s.url + "/v1/load_lora_adapter",
                              json={"lora_name": n, "lora_path": str(adapters[n][0])}, timeout=10)
            assert r.status_code == 200, r.text
        # One resident at a time: each use reloads the other from its path, same answers.
        first = {n: text(s, n) for n in ("a", "b")}
        assert first["a"] != first["b"]
        assert {n: text(s, n) for n in ("b", "a")} == first
    finally:
        s.stop()


def test_adapter_path_is_the_default(ingot_bin, tiny_model, adapters, lora_server):
    s = Server(ingot_bin, tiny_model, "--adapter-path", str(adapters["c"][0]))
    try:
        assert text(s, "anything") == text(lora_server, "c")
        assert [m["id"] for m in requests.get(s.url + "/v1/models", timeout=10).json()["data"]][1:] == ["c"]
    finally:
        s.stop()


def test_bad_adapter_at_start_is_a_clear_error(ingot_bin, tiny_model, tmp_path):
    import subprocess
    for flag, needle in [(["--lora", f"x={tmp_path}/missing"], "not found"),
                         (["--lora", "noequals"], "NAME=PATH"),
                         (["--max-loras", "0"], "--max-loras")]:
        r = subprocess.run([ingot_bin, "serve", "--model", str(tiny_model), "--port", "0", *flag],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and needle in r.stderr, (flag, r.stderr)
