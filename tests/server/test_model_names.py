"""The names a served model goes by: /v1/models shows the repo id or the file /
folder name (never a filesystem path), and any name a client sends means the
one served model (Anthropic SDKs send Claude names), unless --strict-model-name."""
import os
import pathlib

import anthropic
import openai
import pytest
import requests

from conftest import Server
from test_smollm2_serve import smollm2

COMMIT = "89abcdef0123456789abcdef0123456789abcdef"


def test_folder_name_and_any_request_name(ingot_bin, tiny_model):
    s = Server(ingot_bin, tiny_model)
    try:
        listed = requests.get(s.url + "/v1/models", timeout=10).json()["data"]
        assert [m["id"] for m in listed] == [tiny_model.name]
        assert f"serving {tiny_model.name} at" in "".join(s.output)
        client = anthropic.Anthropic(base_url=s.url, api_key="none")
        r = client.messages.create(model="claude-sonnet-4-5", max_tokens=4,
                                   messages=[{"role": "user", "content": "hi"}])
        assert r.model == tiny_model.name and r.content[0].type == "text"
        o = openai.OpenAI(base_url=s.url + "/v1", api_key="none")
        assert o.chat.completions.create(model="gpt-4o", max_tokens=2,
                                         messages=[{"role": "user", "content": "hi"}]).model == tiny_model.name
        # A lookup by id answers only for the served names.
        assert requests.get(s.url + "/v1/models/claude-sonnet-4-5", timeout=10).status_code == 404
        assert requests.get(s.url + "/v1/models/" + tiny_model.name, timeout=10).status_code == 200
    finally:
        s.stop()


def test_strict_model_name_and_served_model_name(ingot_bin, tiny_model):
    s = Server(ingot_bin, tiny_model, "--strict-model-name", "--served-model-name", "my-model")
    try:
        assert requests.get(s.url + "/v1/models", timeout=10).json()["data"][0]["id"] == "my-model"
        client = anthropic.Anthropic(base_url=s.url, api_key="none")
        with pytest.raises(anthropic.NotFoundError) as e:
            client.messages.create(model="claude-sonnet-4-5", max_tokens=4,
                                   messages=[{"role": "user", "content": "hi"}])
        assert "my-model" in str(e.value)
        for name in ("my-model", tiny_model.name, str(tiny_model), "default"):
            r = client.messages.create(model=name, max_tokens=2, messages=[{"role": "user", "content": "hi"}])
            assert r.model == "my-model", name
    finally:
        s.stop()


def test_repo_id_from_the_hub_cache(ingot_bin, tmp_path, monkeypatch):
    """A model found by name in the hub cache is served as its repo id."""
    gguf = smollm2()
    repo = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
    root = tmp_path / ("models--" + repo.replace("/", "--"))
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(COMMIT)
    (root / "snapshots" / COMMIT).mkdir(parents=True)
    (root / "snapshots" / COMMIT / gguf.name).symlink_to(gguf)
    for k in [k for k in os.environ if k.startswith(("HF_", "INGOT_MODELS_DIR"))]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    s = Server(ingot_bin, "SmolLM2")
    try:
        assert requests.get(s.url + "/v1/models", timeout=10).json()["data"][0]["id"] == repo
    finally:
        s.stop()
    s = Server(ingot_bin, pathlib.Path(str(root / "snapshots" / COMMIT / gguf.name)))
    try:
        assert requests.get(s.url + "/v1/models", timeout=10).json()["data"][0]["id"] == repo
    finally:
        s.stop()
