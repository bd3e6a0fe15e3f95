"""`ingot serve --device cuda` end to end, for the GPU machine (CI has no GPU).

Builds the tests' tiny random llama (float32) with a real tokenizer, starts one
server on the CPU and one on CUDA, and checks through HTTP:
  1. greedy completions: CUDA text equal to the CPU's (float32, TF32 off);
  2. a streamed chat completion: chunks, finish_reason and usage;
  3. 16 concurrent streams on CUDA, each equal to the same request alone;
  4. a stream closed mid-way frees its KV blocks (/metrics);
  5. /health and a bad request's 400 on the CUDA server.
Prints one line per check and exits non-zero if any fails.
Usage: python3 bench/gpu/serve_check.py INGOT_BIN TOKENIZER_DIR [DEVICE=cuda]
(DEVICE cpu runs the same checks CPU against CPU, to check the script itself.)
"""
import concurrent.futures
import json
import pathlib
import sys
import tempfile
import time

import requests

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "server"))
from conftest import Server, build_tiny_llama  # noqa: E402

PROMPTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):", "1, 2, 3, 4,",
           "The quick brown fox", "In 1905 Einstein", "Water boils at", "My favourite colour is"]


def complete(url, prompt, max_tokens=24, stream=False):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    return requests.post(url + "/v1/completions", json=body, timeout=120, stream=stream)


def streamed_text(url, prompt, max_tokens):
    text = ""
    with complete(url, prompt, max_tokens, stream=True) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith(b"data: {"):
                text += json.loads(line[6:])["choices"][0].get("text", "")
    return text


def main():
    ingot, tokenizer = sys.argv[1], pathlib.Path(sys.argv[2])
    device = sys.argv[3] if len(sys.argv) > 3 else "cuda"
    failures = []

    def check(name, ok, detail=""):
        print(f"{'PASS' if ok else 'FAIL'} {name} {detail}".rstrip(), flush=True)
        if not ok:
            failures.append(name)

    model = build_tiny_llama(pathlib.Path(tempfile.mkdtemp()) / "tiny", tokenizer)
    cpu = Server(ingot, model)
    t0 = time.time()
    gpu = Server(ingot, model, "--device", device)
    print(f"{device} server ready in {time.time() - t0:.2f} s", flush=True)
    try:
        same = 0
        for p in PROMPTS:
            a, b = complete(cpu.url, p).json(), complete(gpu.url, p).json()
            same += a["choices"][0]["text"] == b["choices"][0]["text"]
        check("greedy completions equal to the CPU's", same == len(PROMPTS), f"{same}/{len(PROMPTS)}")

        chunks, finish, usage = 0, None, None
        body = {"messages": [{"role": "user", "content": "Hello there"}], "max_tokens": 20, "temperature": 0,
                "stream": True, "stream_options": {"include_usage": True}}
        with requests.post(gpu.url + "/v1/chat/completions", json=body, stream=True, timeout=120) as r:
            status = r.status_code
            for line in r.iter_lines():
                if not line.startswith(b"data: {"):
                    continue
                ev = json.loads(line[6:])
                if ev.get("usage"):
                    usage = ev["usage"]
                for c in ev.get("choices", []):
                    chunks += 1
                    finish = c.get("finish_reason") or finish
        check("streamed chat", chunks > 1 and finish in ("stop", "length") and usage is not None,
              f"HTTP {status}, {chunks} chunks, finish {finish}, usage {usage}")

        alone = {p: streamed_text(gpu.url, p, 32) for p in PROMPTS}
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            together = list(pool.map(lambda i: streamed_text(gpu.url, PROMPTS[i % 8], 32), range(16)))
        equal = sum(t == alone[PROMPTS[i % 8]] for i, t in enumerate(together))
        check("16 concurrent streams equal to each alone", equal == 16, f"{equal}/16")

        before = gpu.metrics()
        base = before["ingot_kv_blocks_used"]
        with complete(gpu.url, "Tell me a long story", 480, stream=True) as r:
            for i, _ in enumerate(r.iter_lines()):
                if i > 6:
                    break
        freed = False
        for _ in range(100):
            m = gpu.metrics()
            if m["ingot_requests_running"] == 0 and m["ingot_kv_blocks_used"] == base:
                freed = True
                break
            time.sleep(0.05)
        made = m["ingot_engine_generation_tokens_total"] - before["ingot_engine_generation_tokens_total"]
        check("closed stream stops and frees its KV", freed and made < 480,
              f"blocks used {m['ingot_kv_blocks_used']} (base {base}), {made:.0f} of 480 tokens generated")

        check("health", requests.get(gpu.url + "/health", timeout=10).json() == {"status": "ok"})
        bad = requests.post(gpu.url + "/v1/completions", data=b"{not json", timeout=10,
                            headers={"Content-Type": "application/json"})
        check("bad JSON is a 400", bad.status_code == 400 and "error" in bad.json(), str(bad.status_code))
        check(f"{device} server still up", gpu.alive())
        m = gpu.metrics()
        print(f"{device} kv blocks total", m.get("ingot_kv_blocks_total"), "generated tokens",
              m.get("ingot_generation_tokens_total"), flush=True)
    finally:
        cpu.stop()
        gpu.stop()
    print(f"{len(failures)} failed" if failures else "all passed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
