"""The HTTP layer under random bodies, truncated requests and slow partial
sends: the server stays up and answers the next good request."""
import random
import socket
import threading
import time

import requests


def good(server):
    r = requests.post(server.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 2}, timeout=30)
    return r.status_code == 200


def raw(server, data: bytes, read=True):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        try:
            s.sendall(data)
            if read:
                return s.recv(65536)
        except (socket.timeout, ConnectionResetError, BrokenPipeError):
            return b""
    return b""


def post_bytes(path, body: bytes, extra=b""):
    return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n" +
            extra + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def test_random_bodies(server):
    rng = random.Random(0)
    for i in range(60):
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(400)))
        path = rng.choice([b"/v1/chat/completions", b"/v1/completions", b"/v1/messages", b"/v1/responses",
                           b"/tokenize"])
        reply = raw(server, post_bytes(path, body))
        assert reply.startswith(b"HTTP/1.1 4"), (i, reply[:80])
    assert server.alive() and good(server)


def test_random_json_of_wrong_types(server):
    rng = random.Random(1)
    values = [None, 1, -5, 2.5, "x", [], {}, [1, "a"], {"a": 1}, True, 1e308]
    keys = ["messages", "prompt", "max_tokens", "temperature", "stream", "n", "stop", "tools", "logprobs", "top_p"]
    for _ in range(80):
        body = {k: rng.choice(values) for k in rng.sample(keys, rng.randrange(1, 6))}
        path = rng.choice(["/v1/chat/completions", "/v1/completions", "/v1/messages"])
        r = requests.post(server.url + path, json=body, timeout=30)
        assert r.status_code < 500, (path, body, r.text)
    assert good(server)


def test_truncated_and_garbage_requests(server):
    raw(server, b"\x00\x01\x02 garbage\r\n\r\n")
    raw(server, b"POST /v1/chat/completions HTTP/1.1\r\nHost", read=False)
    raw(server, b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5000\r\n\r\n{\"messages\"", read=False)
    raw(server, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n")
    reply = raw(server, post_bytes(b"/v1/chat/completions", b"x" * (17 << 20)))
    assert reply.startswith(b"HTTP/1.1 413") or reply == b""
    assert server.alive() and good(server)


def test_slow_partial_senders(server):
    req = post_bytes(b"/v1/completions", b'{"prompt": "hi", "max_tokens": 2}')
    socks = []
    for _ in range(8):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.sendall(req[:10])
        socks.append(s)
    assert good(server)  # stalled senders do not block others
    done = []

    def trickle(s):
        for b in req[10:]:
            s.sendall(bytes([b]))
            time.sleep(0.002)
        done.append(s.recv(65536))
    threads = [threading.Thread(target=trickle, args=(s,)) for s in socks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for s in socks:
        s.close()
    assert len(done) == 8 and all(d.startswith(b"HTTP/1.1 200") for d in done)
    assert good(server)
