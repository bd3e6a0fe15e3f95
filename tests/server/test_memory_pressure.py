"""Out-of-memory pressure: `ingot serve` under a memory budget that leaves
only a sliver for the KV cache answers oversized requests with 429 and keeps
serving small ones; a crowd of requests that together exceed the budget is
queued or turned away, never crashes the server."""
import concurrent.futures
import re
import subprocess

import pytest
import requests

from conftest import Server

# The process's resident baseline, part of the fixed cost, varies by a few hundred KB from one
# start to the next; the context and the sliver are sized so that this cannot move the room
# outside its range: ~1024 tokens of this model's KV (512 bytes per token) in a 2048 context.
CTX = 2048
KV_SLIVER_BYTES = 512 << 10


def fixed_cost_gib(ingot_bin, model):
    """What the budget must cover before any KV: the server reports it when refused."""
    p = subprocess.run([ingot_bin, "serve", "--model", str(model), "--port", "0", "--ctx", str(CTX),
                        "--memory-budget", "0.000001"], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    m = re.search(r"\(([0-9.e+-]+) GiB\)", p.stdout + p.stderr)
    assert m, p.stdout + p.stderr
    return float(m.group(1))


KV_BYTES_PER_TOKEN = 512  # 2 layers x 2 KV heads x 16 dims x (K + V) x float32
BLOCK_TOKENS = 16         # ingot_kv_blocks_total counts blocks of this many tokens


@pytest.fixture(scope="module")
def tight(ingot_bin, tiny_model):
    # The resident baseline differs a little between processes, so the budget is
    # corrected from what the running server reports until its KV room is in range.
    budget = fixed_cost_gib(ingot_bin, tiny_model) + KV_SLIVER_BYTES / 2**30
    for _ in range(6):
        try:
            s = Server(ingot_bin, tiny_model, "--memory-budget", f"{budget:.9f}", "--max-queue", "8",
                       "--prompt-cache-size", "0", ctx=CTX)
        except AssertionError as e:  # this process's fixed cost came out higher: it says by how much
            m = re.search(r"\(([0-9.e+-]+) GiB\)", str(e))
            assert m, str(e)
            budget = float(m.group(1)) + KV_SLIVER_BYTES / 2**30
            continue
        room = s.metrics()["ingot_kv_blocks_total"] * BLOCK_TOKENS * KV_BYTES_PER_TOKEN
        if 192 << 10 <= room <= 896 << 10:  # room for 384-1792 tokens: less than the 2048 of a full context
            break
        s.stop()
        budget += (KV_SLIVER_BYTES - room) / 2**30
    else:
        pytest.fail(f"could not set a KV room near {KV_SLIVER_BYTES} bytes")
    s.room_tokens = int(room // KV_BYTES_PER_TOKEN)
    yield s
    s.stop()
    assert s.proc.returncode in (0, -15), "".join(s.output)


def complete(url, words, max_tokens):
    return requests.post(url + "/v1/completions", json={"prompt": " ".join(["word"] * words), "max_tokens": max_tokens},
                         timeout=120)


def test_oversized_request_is_429_and_small_ones_still_served(tight):
    m = tight.metrics()
    assert 0 < m["ingot_kv_blocks_total"], m
    big = complete(tight.url, 1900, 100)  # ~2000 tokens of KV: more than the budget holds (room_tokens <= 1792)
    assert big.status_code == 429, big.text
    assert big.json()["error"]["type"] == "rate_limit_error"
    assert big.headers.get("Retry-After")
    small = complete(tight.url, 8, 4)
    assert small.status_code == 200, small.text
    assert tight.alive()


def test_crowd_over_the_budget_is_queued_or_refused(tight):
    # Each fits alone (about 60 % of the room); the 16 together exceed it many times over.
    words = tight.room_tokens * 6 // 10 - 50
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        codes = [r.status_code for r in pool.map(lambda _: complete(tight.url, words, 30), range(16))]
    assert all(c in (200, 429, 503) for c in codes), codes
    assert 200 in codes, codes
    assert tight.alive()
    assert requests.get(tight.url + "/health", timeout=5).status_code == 200
