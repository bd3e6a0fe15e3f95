"""Slow, idle and greedy clients on a real `ingot serve` (loopback only, each
case bounded in seconds): half-open connections do not starve anyone, the
connection caps answer 503, idle and trickling connections are closed at
their deadlines, a client that stops reading a stream gets its generation
cancelled, and the open-file limit is raised to fit the connection cap."""
import json
import resource
import socket
import subprocess
import time

import pytest
import requests

from conftest import Server

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


@pytest.fixture(scope="module", autouse=True)
def enough_descriptors():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1400:
        pytest.skip(f"the open-file hard limit ({hard}) is below what 1 000 client sockets need")
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096) if hard != resource.RLIM_INFINITY else 4096, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def connect(server, source="127.0.0.1", timeout=5):
    return socket.create_connection(("127.0.0.1", server.port), timeout=timeout, source_address=(source, 0))


def read_until_closed(s, limit):
    """(bytes read, seconds until the server closed), or seconds=None when still open after `limit`."""
    t0 = time.time()
    got = b""
    s.settimeout(0.1)
    while time.time() - t0 < limit:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return got, time.time() - t0
        if not chunk:
            return got, time.time() - t0
        got += chunk
    return got, None


def timed(fn):
    t0 = time.time()
    r = fn()
    return r, time.time() - t0


def test_1000_idle_and_half_open_connections_leave_health_and_chat_answering(server):
    held = []
    try:
        for i in range(1000):
            s = connect(server)
            if i % 2:  # every other one sends half a head; the rest send nothing
                s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Ty")
            held.append(s)
        r, took = timed(lambda: requests.get(server.url + "/health", timeout=10))
        assert r.status_code == 200 and took < 1.0, took
        r, took = timed(lambda: requests.post(server.url + "/v1/chat/completions", json=CHAT, timeout=10))
        assert r.status_code == 200 and took < 1.0, took
        assert r.json()["choices"][0]["message"]["role"] == "assistant"
    finally:
        for s in held:
            s.close()
    assert server.alive()


@pytest.fixture(scope="module")
def strict(ingot_bin, tiny_model):
    s = Server(ingot_bin, tiny_model, "--max-connections", "40", "--max-connections-per-client", "20",
               "--header-timeout", "2", "--keep-alive-timeout", "2", "--io-timeout", "1",
               "--prompt-cache-size", "0", ctx=2048)
    yield s
    s.stop()
    assert s.proc.returncode in (0, -15), "".join(s.output)


def refused(server, source):
    with connect(server, source) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        got, closed = read_until_closed(s, 3)
    assert closed is not None, "a refused connection must be closed"
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503"), got
    assert b"Retry-After: 1" in head
    err = json.loads(body)["error"]
    assert err["code"] == "too_many_connections"
    return err["message"]


def test_caps_per_client_and_in_total_answer_503(strict):
    held = [connect(strict, "127.0.0.2") for _ in range(20)]
    try:
        assert "from 127.0.0.2 (limit 20)" in refused(strict, "127.0.0.2")
        # Another client address is still served.
        with connect(strict, "127.0.0.3") as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            got, _ = read_until_closed(s, 3)
        assert got.startswith(b"HTTP/1.1 200"), got
        held += [connect(strict, "127.0.0.4") for _ in range(20)]  # 40 open: the total cap
        assert "too many open connections (limit 40)" in refused(strict, "127.0.0.5")
    finally:
        for s in held:
            s.close()
    deadline = time.time() + 3
    while time.time() < deadline:  # the slots come back as the server sees the closes
        try:
            if requests.get(strict.url + "/health", timeout=5).status_code == 200:
                break
        except requests.ConnectionError:
            pass
        time.sleep(0.05)
    m = strict.metrics()
    assert m['ingot_http_connection_events_total{event="refused_client_limit"}'] >= 1
    assert m['ingot_http_connection_events_total{event="refused_total_limit"}'] >= 1


def test_idle_keep_alive_connection_is_closed_after_the_deadline(strict):
    with connect(strict, "127.0.0.6") as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")  # kept alive by default
        s.settimeout(5)
        assert s.recv(65536).startswith(b"HTTP/1.1 200")
        _, closed = read_until_closed(s, 6)
    assert closed is not None and 1.5 < closed < 4.0, closed


def test_a_head_trickling_in_slower_than_the_deadline_is_closed(strict):
    head = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
    with connect(strict, "127.0.0.7") as s:
        t0 = time.time()
        got = b""
        for b in head:  # each byte within the idle deadline, the whole head far past the head deadline
            try:
                s.sendall(bytes([b]))
            except (BrokenPipeError, ConnectionResetError):
                break
            chunk, closed = read_until_closed(s, 0.3)
            got += chunk
            if closed is not None:
                break
        took = time.time() - t0
    assert 1.5 < took < 4.0, took
    assert got.startswith(b"HTTP/1.1 408"), got
    assert "did not arrive within 2 s" in json.loads(got.partition(b"\r\n\r\n")[2])["error"]["message"]
    assert strict.metrics()['ingot_http_connection_events_total{event="header_timeout"}'] >= 1


def test_a_stalled_stream_reader_gets_its_request_cancelled(strict):
    base = strict.metrics()
    body = json.dumps({"messages": [{"role": "user", "content": "Tell a long story."}], "stream": True,
                       "max_tokens": 1900, "logprobs": True, "top_logprobs": 5}).encode()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window, set before connecting
    s.bind(("127.0.0.8", 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", strict.port))
    try:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        assert s.recv(1024).startswith(b"HTTP/1.1 200")
        # ...and read no more. The server's buffers fill, its write stalls past --io-timeout (1 s),
        # the generation is cancelled and its KV freed, long before 1 900 tokens.
        # (The socket's inactivity timeout or the stream queue's write deadline, whichever fires first.)
        def stalls(m):
            return sum(m.get(f'ingot_http_connection_events_total{{event="{e}"}}', 0)
                       for e in ("io_timeout", "stalled_stream"))
        deadline = time.time() + 20
        while time.time() < deadline:
            m = strict.metrics()
            if stalls(m) > stalls(base) and m["ingot_requests_running"] == 0:
                break
            time.sleep(0.1)
        assert stalls(m) > stalls(base), m
        assert m["ingot_requests_running"] == 0
        assert m["ingot_kv_blocks_used"] == base["ingot_kv_blocks_used"]
        generated = m["ingot_engine_generation_tokens_total"] - base["ingot_engine_generation_tokens_total"]
        assert 0 < generated < 1900
        r, took = timed(lambda: requests.get(strict.url + "/health", timeout=5))
        assert r.status_code == 200 and took < 1.0
    finally:
        s.close()


def lower_soft_fd_limit(soft):
    def set_limit():
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return set_limit


def open_file_limit(pid):
    for line in open(f"/proc/{pid}/limits"):
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-file limit")


def test_the_soft_open_file_limit_is_raised_to_fit_the_connection_cap(ingot_bin, tiny_model):
    s = Server(ingot_bin, tiny_model, "--max-connections", "1000", preexec_fn=lower_soft_fd_limit(256))
    try:
        assert open_file_limit(s.proc.pid) >= 1000
        assert not any("open-file limit" in line for line in s.output), s.output
    finally:
        s.stop()


def test_a_hard_open_file_limit_lowers_the_connection_cap(ingot_bin, tiny_model):
    def hard_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (300, 300))
    s = Server(ingot_bin, tiny_model, preexec_fn=hard_limit)
    try:
        warning = [line for line in s.output if "open-file limit" in line]
        assert warning and "leaves room for 44 connections" in warning[0], s.output
        held = [connect(s) for _ in range(44)]
        try:
            assert "too many open connections (limit 44)" in refused(s, "127.0.0.1")
        finally:
            for c in held:
                c.close()
    finally:
        s.stop()


@pytest.mark.parametrize("flag", ["--header-timeout", "--keep-alive-timeout", "--io-timeout", "--max-connections",
                                  "--max-connections-per-client", "--http-threads"])
def test_limits_below_one_are_refused_at_start(ingot_bin, tiny_model, flag):
    r = subprocess.run([ingot_bin, "serve", "--model", str(tiny_model), "--port", "0", flag, "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert flag in r.stderr + r.stdout
