"""mlx_lm.server (the drop-in reference, CPU build of MLX) beside `ingot serve`
on the same checkpoint: the same requests must give the same field names,
shapes, finish reasons and usage."""
import subprocess
import sys
import threading
import time

import pytest
import requests

from conftest import free_port

MSG = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def mlx_server(tiny_model):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mlx_lm", "server", "--model", str(tiny_model), "--port", str(port),
                             "--max-tokens", "16"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = []
    threading.Thread(target=lambda: log.extend(proc.stdout), daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        try:
            if requests.get(url + "/health", timeout=2).ok:
                break
        except requests.ConnectionError:
            time.sleep(0.2)
    assert proc.poll() is None, "mlx_lm.server exited: " + "".join(log)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def keys(obj, prefix=""):
    """Every key path of a JSON object (lists looked at through their first item)."""
    out = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(prefix + k)
            out |= keys(v, prefix + k + ".")
    elif isinstance(obj, list) and obj:
        out |= keys(obj[0], prefix + "[].")
    return out


def both(server, mlx_url, path, body):
    a = requests.post(server.url + path, json=body, timeout=60)
    b = requests.post(mlx_url + path, json=body, timeout=60)
    assert a.status_code == b.status_code == 200, (a.text, b.text)
    return a.json(), b.json()


def test_health_agrees(server, mlx_server):
    assert requests.get(server.url + "/health").json() == requests.get(mlx_server + "/health").json()


def test_chat_fields_finish_and_usage_agree(server, mlx_server):
    body = {"messages": MSG, "max_tokens": 5, "temperature": 0}
    ours, ref = both(server, mlx_server, "/v1/chat/completions", body)
    missing = keys(ref) - keys(ours)
    assert not missing, f"fields mlx_lm.server sends that ingot does not: {missing}"
    assert ours["object"] == ref["object"] == "chat.completion"
    assert ours["choices"][0]["finish_reason"] == ref["choices"][0]["finish_reason"]
    assert ours["usage"]["prompt_tokens"] == ref["usage"]["prompt_tokens"]
    assert ours["usage"]["completion_tokens"] == ref["usage"]["completion_tokens"]
    # Same weights, same greedy rule: the same text (mlx_lm's BPE detokenizer drops the
    # first token's leading space; Hugging Face's decode, which ingot follows, keeps it).
    assert ours["choices"][0]["message"]["content"].lstrip(" ") == ref["choices"][0]["message"]["content"]


def test_completion_fields_agree(server, mlx_server):
    ours, ref = both(server, mlx_server, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 5,
                                                            "temperature": 0})
    missing = keys(ref) - keys(ours)
    assert not missing, missing
    assert ours["choices"][0]["finish_reason"] == ref["choices"][0]["finish_reason"]
    assert ours["usage"]["completion_tokens"] == ref["usage"]["completion_tokens"]


def sse(url, body):
    chunks = []
    with requests.post(url + "/v1/chat/completions", json=body, stream=True, timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                chunks.append(__import__("json").loads(line[6:]))
    return chunks


def test_stream_shapes_agree(server, mlx_server):
    body = {"messages": MSG, "max_tokens": 5, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    ours, ref = sse(server.url, body), sse(mlx_server, body)
    assert ours and ref
    assert ours[0]["object"] == ref[0]["object"] == "chat.completion.chunk"
    ref_keys = set().union(*(keys(c) for c in ref))
    our_keys = set().union(*(keys(c) for c in ours))
    assert not (ref_keys - our_keys), ref_keys - our_keys
    fin = lambda cs: [c["choices"][0]["finish_reason"] for c in cs if c.get("choices") and c["choices"][0].get("finish_reason")]
    assert fin(ours)[-1:] == fin(ref)[-1:]
    usage = lambda cs: [c["usage"] for c in cs if c.get("usage")]
    assert usage(ours)[-1]["completion_tokens"] == usage(ref)[-1]["completion_tokens"]
