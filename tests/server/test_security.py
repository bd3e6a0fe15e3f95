"""Security defaults of a real `ingot serve`: loopback bind, the API key on
every route but /health, CORS only for the origin given with --cors, header
limits, and path-like request fields that never reach the file system."""
import socket

import pytest
import requests

from conftest import Server

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
ROUTES = [("GET", "/metrics", None), ("GET", "/v1/models", None), ("GET", "/v1/models/default", None),
          ("GET", "/models", None), ("POST", "/v1/chat/completions", CHAT), ("POST", "/chat/completions", CHAT),
          ("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2}),
          ("POST", "/completions", {"prompt": "hi", "max_tokens": 2}),
          ("POST", "/v1/embeddings", {"input": "hi"}),
          ("POST", "/v1/responses", {"input": "hi", "max_output_tokens": 2}),
          ("POST", "/v1/messages", {"max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}),
          ("POST", "/v1/messages/count_tokens", {"messages": [{"role": "user", "content": "hi"}]}),
          ("POST", "/tokenize", {"content": "hi"}), ("POST", "/detokenize", {"tokens": [1]})]


def listening_addresses(port):
    """Local addresses of listening TCP sockets on `port` (from /proc/net/tcp{,6})."""
    out = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(name).read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            f = line.split()
            addr, p = f[1].split(":")
            if int(p, 16) == port and f[3] == "0A":  # LISTEN
                out.append(addr)
    return out


@pytest.fixture(scope="module")
def keyed(ingot_bin, tiny_model):
    s = Server(ingot_bin, tiny_model, "--api-key", "sekrit", "--cors", "http://app.test")
    yield s
    s.stop()


def test_binds_loopback_by_default(server):
    addrs = listening_addresses(server.port)
    assert addrs == ["0100007F"], addrs  # 127.0.0.1 only


@pytest.mark.parametrize("method,path,body", ROUTES)
def test_api_key_on_every_route(keyed, method, path, body):
    url = keyed.url + path
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Bearer sekrit2"},
                    {"x-api-key": "sekri"}, {"Authorization": "sekrit"}):
        r = requests.request(method, url, json=body, headers=headers, timeout=30)
        assert r.status_code == 401, (path, headers, r.status_code)
    for headers in ({"Authorization": "Bearer sekrit"}, {"x-api-key": "sekrit"}):
        r = requests.request(method, url, json=body, headers=headers, timeout=60)
        assert r.status_code != 401 and r.status_code < 500, (path, r.status_code, r.text)


def test_health_needs_no_key(keyed):
    assert requests.get(keyed.url + "/health", timeout=5).status_code == 200


def test_cors_only_for_the_given_origin(keyed, server):
    pre = {"Origin": "http://app.test", "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "authorization, content-type"}
    r = requests.options(keyed.url + "/v1/chat/completions", headers=pre, timeout=5)
    assert r.status_code == 204 and r.headers["Access-Control-Allow-Origin"] == "http://app.test", r.headers
    assert "authorization" in r.headers["Access-Control-Allow-Headers"].lower()
    r = requests.options(keyed.url + "/v1/chat/completions", headers=dict(pre, Origin="http://evil.test"), timeout=5)
    assert r.status_code == 403 and "Access-Control-Allow-Origin" not in r.headers
    auth = {"Authorization": "Bearer sekrit"}
    r = requests.get(keyed.url + "/v1/models", headers=dict(auth, Origin="http://app.test"), timeout=5)
    assert r.headers.get("Access-Control-Allow-Origin") == "http://app.test"
    r = requests.get(keyed.url + "/v1/models", headers=dict(auth, Origin="http://evil.test"), timeout=5)
    assert "Access-Control-Allow-Origin" not in r.headers
    # The default server has CORS off.
    r = requests.options(server.url + "/v1/chat/completions", headers=pre, timeout=5)
    assert r.status_code == 405 and "Access-Control-Allow-Origin" not in r.headers
    r = requests.get(server.url + "/v1/models", headers={"Origin": "http://app.test"}, timeout=5)
    assert "Access-Control-Allow-Origin" not in r.headers


def test_cors_flag_takes_an_origin(ingot_bin, tiny_model):
    s = Server(ingot_bin, tiny_model, "--cors", "*")
    try:
        r = requests.get(s.url + "/health", headers={"Origin": "http://x.test"}, timeout=5)
        assert r.headers.get("Access-Control-Allow-Origin") == "*"
    finally:
        s.stop()


def test_header_limits(server):
    many = {f"X-H{i}": "v" for i in range(100)}
    assert requests.get(server.url + "/v1/models", headers=many, timeout=5).status_code == 431
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Huge: " + b"a" * 20000 + b"\r\nConnection: close\r\n\r\n")
        reply = s.recv(4096)
    assert not reply.startswith(b"HTTP/1.1 200"), reply[:100]
    assert requests.get(server.url + "/health", timeout=5).status_code == 200


def test_path_like_fields_are_refused(server, ingot_bin, tiny_model):
    # By default any model name means the served model: a path-like one is a name like any other, never opened.
    for name in ["../../../../etc/passwd", "/etc/passwd"]:
        r = requests.post(server.url + "/v1/chat/completions", json=dict(CHAT, model=name), timeout=30)
        assert r.status_code == 200 and r.json()["model"] == tiny_model.name and "root:" not in r.text, (name, r.text)
    strict = Server(ingot_bin, tiny_model, "--strict-model-name")
    try:
        for name in ["../../../../etc/passwd", "/etc/passwd", "../" + "x", "default/../../etc"]:
            r = requests.post(strict.url + "/v1/chat/completions", json=dict(CHAT, model=name), timeout=30)
            assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found", (name, r.text)
    finally:
        strict.stop()
    for name in ["../../../../etc/passwd", "/etc/passwd", "../" + "x", "default/../../etc"]:
        r = requests.post(server.url + "/v1/responses", json={"input": "x", "previous_response_id": name}, timeout=30)
        assert r.status_code == 404, (name, r.text)
    for path in ["/v1/models/..%2F..%2Fetc%2Fpasswd", "/v1/models/../../etc/passwd", "/../../etc/passwd"]:
        r = requests.get(server.url + path, timeout=5)
        assert r.status_code in (400, 404), (path, r.status_code)
        assert "root:" not in r.text
