"""POST /v1/embeddings against an independent float32 numpy forward of the
tiny random llama (Hugging Face rotate-half RoPE): last-token and mean
pooling, L2 norm, `dimensions`, float and base64, bad inputs."""
import base64
import json
import shutil

import numpy as np
import openai
import pytest
import requests
from safetensors.numpy import load_file

from conftest import Server


def reference_hidden(model_dir, ids):
    cfg = json.loads((model_dir / "config.json").read_text())
    w = load_file(str(model_dir / "model.safetensors"))
    H, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps, theta = cfg["head_dim"], cfg["rms_norm_eps"], cfg["rope_theta"]
    T = len(ids)

    def rms(x, g):
        return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * g

    inv = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.outer(np.arange(T), inv)
    cos = np.concatenate([np.cos(ang)] * 2, -1).astype(np.float32)
    sin = np.concatenate([np.sin(ang)] * 2, -1).astype(np.float32)

    def rope(x):  # [heads, T, hd]
        half = np.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], -1)
        return x * cos + half * sin

    x = w["model.embed_tokens.weight"][ids].astype(np.float32)
    mask = np.triu(np.full((T, T), -np.inf, np.float32), 1)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, nh, hd).transpose(1, 0, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, nkv, hd).transpose(1, 0, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, nkv, hd).transpose(1, 0, 2)
        q, k = rope(q), rope(k)
        k, v = np.repeat(k, nh // nkv, 0), np.repeat(v, nh // nkv, 0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = (s @ v).transpose(1, 0, 2).reshape(T, nh * hd)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    return rms(x, w["model.norm.weight"])


def unit(v):
    return v / np.linalg.norm(v)


def token_ids(server, text):
    return requests.post(server.url + "/tokenize", json={"prompt": text}, timeout=30).json()["tokens"]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none")


TEXTS = ["The quick brown fox", "Embeddings of a random model.", "x"]


def test_last_token_pooling_matches_reference(server, client, tiny_model):
    r = client.embeddings.create(model="default", input=TEXTS, encoding_format="float")
    assert [d.index for d in r.data] == [0, 1, 2]
    total = 0
    for text, d in zip(TEXTS, r.data):
        ids = token_ids(server, text)
        total += len(ids)
        want = unit(reference_hidden(tiny_model, ids)[-1])
        got = np.array(d.embedding, np.float32)
        assert got.shape == want.shape
        assert np.linalg.norm(got - want) / np.linalg.norm(want) <= 1e-5
    assert r.usage.prompt_tokens == total and r.usage.total_tokens == total


def test_base64_token_ids_and_dimensions(server, client, tiny_model):
    ids = token_ids(server, TEXTS[0])
    f = client.embeddings.create(model="default", input=[ids], encoding_format="float").data[0].embedding
    raw = requests.post(server.url + "/v1/embeddings", json={"input": ids, "encoding_format": "base64"},
                        timeout=30).json()
    b = np.frombuffer(base64.b64decode(raw["data"][0]["embedding"]), "<f4")
    np.testing.assert_array_equal(b, np.array(f, np.float32))
    # Without encoding_format the SDK asks for base64 and decodes it itself.
    sdk = client.embeddings.create(model="default", input=TEXTS[0]).data[0].embedding
    np.testing.assert_allclose(sdk, f, rtol=0, atol=0)
    d = client.embeddings.create(model="default", input=TEXTS[0], dimensions=16).data[0].embedding
    assert len(d) == 16
    np.testing.assert_allclose(d, unit(np.array(f[:16], np.float64)), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("body,param", [
    ({}, "input"),
    ({"input": []}, "input"),
    ({"input": ""}, "input"),
    ({"input": [1.5]}, "input"),
    ({"input": [10 ** 9]}, "input"),
    ({"input": [{"a": 1}]}, "input"),
    ({"input": "hi", "encoding_format": "int8"}, "encoding_format"),
    ({"input": "hi", "dimensions": 0}, "dimensions"),
    ({"input": "hi", "dimensions": 100000}, "dimensions"),
])
def test_bad_inputs_are_400(server, body, param):
    r = requests.post(server.url + "/v1/embeddings", json=body, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_mean_pooling_from_sentence_transformers_config(ingot_bin, tiny_model, tmp_path):
    d = tmp_path / "mean-model"
    shutil.copytree(tiny_model, d)
    (d / "1_Pooling").mkdir()
    (d / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    s = Server(ingot_bin, d)
    try:
        ids = token_ids(s, TEXTS[1])
        got = requests.post(s.url + "/v1/embeddings", json={"input": TEXTS[1]}, timeout=30).json()
        want = unit(reference_hidden(d, ids).mean(0))
        v = np.array(got["data"][0]["embedding"], np.float32)
        assert np.linalg.norm(v - want) / np.linalg.norm(want) <= 1e-5
        (d / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    finally:
        s.stop()
    s = Server(ingot_bin, d)
    try:
        r = requests.post(s.url + "/v1/embeddings", json={"input": "hi"}, timeout=30)
        assert r.status_code == 400 and "cls" in r.json()["error"]["message"]
    finally:
        s.stop()
