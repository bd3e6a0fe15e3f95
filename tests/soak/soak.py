"""Soak / load run against a real `ingot serve`: concurrent clients issue a
mix of streaming and plain chat requests, hang up in the middle of streams,
and fire bursts past the server's queue limit. Bounded by a request count
and a wall-clock time. Reports requests served, errors by type, TTFT
percentiles and the server's resident memory before and after.

Used by test_soak.py (short, in CI) and on its own for long runs:
  python3 tests/soak/soak.py --clients 64 --duration 1800 [--model DIR]
(without --model it builds the tiny random model of tests/server/conftest.py).
"""
import argparse
import asyncio
import collections
import importlib.util
import json
import os
import pathlib
import random
import sys
import tempfile
import time

import openai
import requests

HERE = pathlib.Path(__file__).resolve().parent


def server_support():
    """tests/server/conftest.py (the tiny model and the Server wrapper), under
    its own module name so it never clashes with another conftest."""
    name = "ingot_server_support"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE.parent / "server" / "conftest.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]

PROMPTS = ["Tell me a story about a lighthouse.", "List three prime numbers.", "What is the capital of France?",
           "Write a haiku about rain.", "Explain recursion briefly.", "Count from one to ten."]


def rss_bytes(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class Tally:
    def __init__(self):
        self.served = 0          # requests answered 200 and read to the end
        self.disconnects = 0     # streams the client hung up on (on purpose)
        self.rejected_429 = 0    # turned away by the queue limit (expected under bursts)
        self.unexpected = collections.Counter()  # error type -> count (fails the run)
        self.examples = {}
        self.ttft = []           # seconds to the first streamed content token
        self.issued = 0

    def error(self, kind: str, detail: str):
        self.unexpected[kind] += 1
        self.examples.setdefault(kind, detail[:300])


def percentile(xs, q):
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


async def one_request(client, tally, rng, mode):
    messages = [{"role": "user", "content": rng.choice(PROMPTS) + f" ({rng.randrange(10**6)})"}]
    kw = dict(model="default", messages=messages, max_tokens=rng.randrange(4, 33), temperature=rng.choice([0, 0.7]))
    tally.issued += 1
    try:
        if mode == "plain":
            r = await client.chat.completions.create(**kw)
            if r.choices[0].finish_reason not in ("stop", "length"):
                tally.error("bad_finish", str(r.choices[0].finish_reason))
            else:
                tally.served += 1
            return
        t0 = time.perf_counter()
        stream = await client.chat.completions.create(stream=True, **kw)
        hang_up_after = rng.randrange(1, 4) if mode == "disconnect" else None
        got, first, finish = 0, None, None
        async for chunk in stream:
            if not chunk.choices:
                continue
            c = chunk.choices[0]
            if c.delta.content and first is None:
                first = time.perf_counter() - t0
            finish = c.finish_reason or finish
            got += 1
            if hang_up_after is not None and got >= hang_up_after:
                await stream.close()
                tally.disconnects += 1
                return
        if first is not None:
            tally.ttft.append(first)
        if finish not in ("stop", "length"):
            tally.error("bad_finish", str(finish))
        else:
            tally.served += 1
    except openai.RateLimitError:
        tally.rejected_429 += 1
    except openai.APIStatusError as e:
        tally.error(f"http_{e.status_code}", e.message)
    except openai.APITimeoutError as e:
        tally.error("timeout", str(e))
    except openai.APIConnectionError as e:
        cause = e.__cause__ or e
        tally.error("connection", f"{mode}: {cause!r} {getattr(cause, '__cause__', None)!r} at {time.time():.3f}")


async def client_loop(client, tally, rng, deadline, budget, only=None):
    while time.monotonic() < deadline and tally.issued < budget:
        if only:
            await one_request(client, tally, rng, only)
            continue
        r = rng.random()
        if r < 0.40:
            await one_request(client, tally, rng, "stream")
        elif r < 0.75:
            await one_request(client, tally, rng, "plain")
        elif r < 0.93:
            await one_request(client, tally, rng, "disconnect")
        else:  # a burst: many at once, past --max-queue
            await asyncio.gather(*[one_request(client, tally, rng, "plain") for _ in range(rng.randrange(4, 12))])


async def run(url, clients, duration, max_requests, seed=0, only=None):
    tally = Tally()
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=120.0)
    deadline = time.monotonic() + duration
    t0 = time.monotonic()
    await asyncio.gather(*[client_loop(client, tally, random.Random(seed * 1000 + i), deadline, max_requests, only)
                           for i in range(clients)])
    await client.close()
    tally.elapsed = time.monotonic() - t0
    return tally


def metrics(url):
    out = {}
    for line in requests.get(url + "/metrics", timeout=10).text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def soak(server, clients, duration, max_requests, settle=3.0, warmup_s=3.0, only=None):
    """Runs warm-up, the soak and a settle period; returns a report dict."""
    # Warm-up: pools, arenas and caches reach their steady state before the baseline.
    asyncio.run(run(server.url, clients, warmup_s, max_requests, only=only))
    time.sleep(settle)
    base = rss_bytes(server.proc.pid)
    t = asyncio.run(run(server.url, clients, duration, max_requests, seed=1, only=only))
    deadline = time.time() + 30
    while time.time() < deadline:
        m = metrics(server.url)
        if m.get("ingot_requests_running", 1) == 0 and m.get("ingot_requests_waiting", 1) == 0:
            break
        time.sleep(0.2)
    time.sleep(settle)
    after = rss_bytes(server.proc.pid)
    m = metrics(server.url)
    return {
        "clients": clients, "elapsed_s": round(t.elapsed, 1), "issued": t.issued, "served": t.served,
        "disconnects": t.disconnects, "rejected_429": t.rejected_429, "unexpected": dict(t.unexpected),
        "unexpected_examples": t.examples, "ttft_p50_ms": round(percentile(t.ttft, 50) * 1000, 1),
        "ttft_p99_ms": round(percentile(t.ttft, 99) * 1000, 1), "streams_timed": len(t.ttft),
        "rss_baseline_mb": round(base / 2**20, 1), "rss_after_mb": round(after / 2**20, 1),
        "running_after": m.get("ingot_requests_running"), "waiting_after": m.get("ingot_requests_waiting"),
        "server_alive": server.alive(),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ingot", default=os.environ.get("INGOT_BIN", str(HERE.parents[1] / "build/src/cli/ingot")))
    ap.add_argument("--model", help="checkpoint dir (default: a tiny random llama)")
    ap.add_argument("--shared", default=os.environ.get("INGOT_SHARED", str(HERE.parents[2] / "shared")))
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--max-requests", type=int, default=10**7)
    ap.add_argument("--max-concurrency", type=int, default=8)
    ap.add_argument("--max-queue", type=int, default=16)
    ap.add_argument("--rss-bound-mb", type=float, default=64)
    ap.add_argument("--only", choices=["stream", "plain", "disconnect"], help="one kind of request instead of the mix")
    ap.add_argument("--server-arg", action="append", default=[], help="extra `ingot serve` argument (repeatable)")
    args = ap.parse_args()
    sup = server_support()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or sup.build_tiny_llama(pathlib.Path(tmp) / "m",
                                               pathlib.Path(args.shared) / "assets/tokenizers/qwen3")
        server = sup.Server(args.ingot, model, "--max-concurrency", str(args.max_concurrency),
                        "--max-queue", str(args.max_queue), *args.server_arg)
        try:
            report = soak(server, args.clients, args.duration, args.max_requests, only=args.only)
        finally:
            server.stop()
        report["exit_code"] = server.proc.returncode
    print(json.dumps(report, indent=2))
    ok = (not report["unexpected"] and report["server_alive"] and report["exit_code"] in (0, -15)
          and report["rss_after_mb"] - report["rss_baseline_mb"] <= args.rss_bound_mb)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
