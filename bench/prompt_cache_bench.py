"""Time to first token of a repeated long prompt through `ingot serve`'s HTTP
API: cold (empty caches), a RAM hit (the same server again), and a disk hit
(a new server on the same --cache-dir, as after a restart); and the disk
restore's throughput against `dd` reading the same snapshot file.

    python3 bench/prompt_cache_bench.py --ingot build/src/cli/ingot --model M.gguf --tokens 2048,8192

TTFT is the latency of a non-streamed request for one token (max_tokens=1),
median of --repeats for the hits (each hit repeat uses a fresh server for the
disk case). The restore time is the server's own log line."""
import argparse
import json
import pathlib
import re
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    def __init__(self, ingot, model, cache, ctx, extra=()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([ingot, "serve", "--model", model, "--port", str(self.port), "--ctx", str(ctx),
                                      "--cache-dir", cache, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines = []
        ready = threading.Event()

        def pump():
            for line in self.proc.stdout:
                self.lines.append(line)
                if "serving" in line and "http://" in line:
                    ready.set()
        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(120):
            raise SystemExit("ingot serve did not start:\n" + "".join(self.lines))

    def post(self, body):
        req = urllib.request.Request(self.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(req, timeout=3600) as r:
                out = json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise SystemExit(f"HTTP {e.code}: {e.read().decode()}")
        return time.perf_counter() - t0, out

    def metric(self, name):
        with urllib.request.urlopen(self.url + "/metrics", timeout=60) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[-1])
        return 0.0

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def system_text(n_lines):
    colors = ["red", "green", "blue", "amber", "violet", "silver", "ochre", "teal"]
    lines = [f"Fact {i}: the {colors[i % 8]} box number {i * 7 % 101} holds {i % 13} stones."
             for i in range(n_lines)]
    return "Remember these facts.\n" + "\n".join(lines)


def count_tokens(url, system):
    body = {"model": "m", "system": system, "messages": [{"role": "user", "content": "Which box is first?"}]}
    req = urllib.request.Request(url + "/v1/messages/count_tokens", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())["input_tokens"]


def lines_for(args, n):
    """Lines of facts that make a prompt of about n tokens (the model's tokenizer counts)."""
    s = Serve(args.ingot, args.model, tempfile.mkdtemp(prefix="ingot-pc-count-"), 1024,
              ["--no-disk-cache", *shlex.split(args.serve_args)])
    try:
        base, lines = count_tokens(s.url, system_text(0)), n // 16
        for _ in range(3):  # later lines have longer numbers: refine at the size itself
            lines = int(lines * (n - base) / (count_tokens(s.url, system_text(lines)) - base))
        return lines
    finally:
        s.stop()


def body(system):
    return {"model": "m", "temperature": 0, "max_tokens": 1,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Which box is first?"}]}


def run_size(args, n):
    ctx = n + 192  # the prompt, one answer token and slack for the count's estimate
    cache = tempfile.mkdtemp(prefix="ingot-pc-bench-")
    b = body(system_text(lines_for(args, n)))
    s = Serve(args.ingot, args.model, cache, ctx, shlex.split(args.serve_args))
    cold, out = s.post(b)
    prompt = out["usage"]["prompt_tokens"]
    ram = []
    for _ in range(args.repeats):
        t, o = s.post(b)
        ram.append(t)
        ram_cached = o["usage"]["prompt_tokens_details"]["cached_tokens"]
    deadline = time.time() + 600
    while s.metric("ingot_prompt_cache_disk_writes_total") < 1 and time.time() < deadline:
        time.sleep(0.1)
    s.stop()
    disk, restore_ms, disk_cached = [], [], 0
    snap = max(pathlib.Path(cache).glob("*/*.ikv"), key=lambda p: p.stat().st_size)
    for _ in range(args.repeats):
        s = Serve(args.ingot, args.model, cache, ctx, shlex.split(args.serve_args))
        t, o = s.post(b)
        s.stop()
        disk.append(t)
        disk_cached = o["usage"]["prompt_tokens_details"]["cached_tokens"]
        for line in s.lines:
            m = re.search(r"restored (\d+) of \d+ tokens \((\d+) bytes\) from disk in ([\d.]+) ms", line)
            if m:
                restore_ms.append(float(m.group(3)))
                size = int(m.group(2))
    # dd of the same file (page cache as warm as the restore's: it was just read).
    dd = subprocess.run(["dd", f"if={snap}", "of=/dev/null", "bs=1M"], capture_output=True, text=True).stderr
    dd_rate = re.search(r"copied, ([\d.]+) s", dd)
    dd_s = float(dd_rate.group(1)) if dd_rate else float("nan")
    r_ms = statistics.median(restore_ms) if restore_ms else float("nan")
    return {
        "target_tokens": n, "prompt_tokens": prompt, "cold_s": cold,
        "ram_s": statistics.median(ram), "ram_cached": ram_cached,
        "disk_s": statistics.median(disk), "disk_cached": disk_cached,
        "snapshot_bytes": snap.stat().st_size, "restore_ms": r_ms,
        "restore_gbps": size / (r_ms / 1e3) / 1e9 if restore_ms else float("nan"),
        "dd_gbps": snap.stat().st_size / dd_s / 1e9,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", default="2048,8192")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--serve-args", default="", help='more `ingot serve` arguments, e.g. "--device cuda"')
    args = ap.parse_args()
    print("| prompt tokens | cold TTFT s | RAM hit s (cached) | disk hit after restart s (cached) | cold/disk "
          "| snapshot MB | restore ms | restore GB/s | dd GB/s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in [int(x) for x in args.tokens.split(",")]:
        r = run_size(args, n)
        print(f"| {r['prompt_tokens']} | {r['cold_s']:.2f} | {r['ram_s']:.3f} ({r['ram_cached']}) "
              f"| {r['disk_s']:.3f} ({r['disk_cached']}) | {r['cold_s'] / r['disk_s']:.0f}x "
              f"| {r['snapshot_bytes'] / 1e6:.0f} | {r['restore_ms']:.1f} | {r['restore_gbps']:.2f} "
              f"| {r['dd_gbps']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
