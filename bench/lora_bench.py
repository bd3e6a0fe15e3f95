"""Decode cost of LoRA adapters in `ingot serve` against the base model alone,
measured with `ingot bench serve`: random PEFT adapters of each rank on every
projection (q/k/v/o/gate/up/down of every layer) of a llama-family GGUF file or
Hugging Face folder.

Per rank, one server holds 4 adapters; two workloads run against it:
  single stream: 1 request at a time naming one adapter (vs naming the base);
  16 streams:    4 `bench serve` clients at concurrency 4, one per adapter
                 (vs the same 4 clients naming the base).
Base and adapter runs alternate on the same server so a load change on a
shared machine hits both alike.

  python3 bench/lora_bench.py --bin build/src/cli/ingot --model SmolLM2.gguf --ranks 8,16,64
  python3 bench/lora_bench.py --bin ingot --model HF_DIR --ranks 16,64 --serve-args "--device cuda"
"""
import argparse
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "tools"))
import lora_adapters as la  # noqa: E402


def write_adapter(dst, layers, mods, rank, seed):
    la.write_peft(dst, la.pairs_for_shapes(layers, mods, rank, seed, std=0.01), rank=rank, alpha=2 * rank)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary, model, flags):
    port = free_port()
    p = subprocess.Popen([binary, "serve", "--model", model, "--port", str(port), "--ctx", "1024",
                          "--max-concurrency", "16", "--prompt-cache-size", "0", "--no-disk-cache", *flags],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if "serving" in line and "http://" in line:
            return p, f"http://127.0.0.1:{port}"
    raise SystemExit("server did not start")


def bench(binary, url, models, conc, n_prompts, args, tmp):
    """Output tokens/s over all clients and the median TPOT (ms) of every request."""
    procs, outs = [], []
    for i, m in enumerate(models):
        out = pathlib.Path(tmp) / f"r{time.monotonic_ns()}-{i}.json"
        outs.append(out)
        procs.append(subprocess.Popen(
            [binary, "bench", "serve", "--url", url, "--model", m, "--concurrency", str(conc),
             "--num-prompts", str(n_prompts), "--input-len", str(args.input_len), "--output-len",
             str(args.output_len), "--seed", str(i + 1), "--vocab-range", "100:40000", "--json", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    t0 = time.perf_counter()
    for p in procs:
        _, err = p.communicate(timeout=1200)
        if p.returncode != 0:
            raise SystemExit(err)
    wall = time.perf_counter() - t0
    tpots, tokens = [], 0
    for out in outs:
        j = json.loads(out.read_text())
        for r in j["levels"][0]["per_request"]:
            tokens += r["output_tokens"]
            if r.get("tpot_ms") is not None:
                tpots.append(r["tpot_ms"])
    return tokens / wall, statistics.median(tpots)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--ranks", default="8,16,64")
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--serve-args", default="", help="more `ingot serve` flags, e.g. '--device cuda'")
    args = ap.parse_args()
    is_dir = pathlib.Path(args.model).is_dir()
    layers, mods = la.config_shapes(args.model) if is_dir else la.gguf_shapes(args.model)
    print(f"load average at start: {os.getloadavg()}")
    print("| rank | workload | base tok/s | LoRA tok/s | base TPOT ms | LoRA TPOT ms | TPOT cost |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for rank in [int(x) for x in args.ranks.split(",")]:
            flags = []
            for i in range(4):
                d = pathlib.Path(tmp) / f"r{rank}-{i}"
                write_adapter(d, layers, mods, rank, seed=100 * rank + i)
                flags += ["--lora", f"a{i}={d}"]
            p, url = start(args.bin, args.model,
                           flags + ["--max-lora-rank", str(max(rank, 64))] + args.serve_args.split())
            try:
                for name, base_models, lora_models, conc, n in [
                        ("1 stream", ["base"], ["a0"], 1, 4),
                        ("16 streams, 4 adapters", ["base"] * 4, ["a0", "a1", "a2", "a3"], 4, 8)]:
                    bench(args.bin, url, base_models, conc, 2, args, tmp)  # warm-up
                    res = {"base": [], "lora": []}
                    for _ in range(args.rounds):
                        res["base"].append(bench(args.bin, url, base_models, conc, n, args, tmp))
                        res["lora"].append(bench(args.bin, url, lora_models, conc, n, args, tmp))
                    bt = statistics.median(x[0] for x in res["base"])
                    lt = statistics.median(x[0] for x in res["lora"])
                    bp = statistics.median(x[1] for x in res["base"])
                    lp = statistics.median(x[1] for x in res["lora"])
                    print(f"| {rank} | {name} | {bt:.1f} | {lt:.1f} | {bp:.2f} | {lp:.2f} | "
                          f"{100 * (lp / bp - 1):+.1f} % |", flush=True)
            finally:
                p.terminate()
                p.wait(timeout=30)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
