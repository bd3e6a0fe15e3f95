"""Start-to-ready of `ingot serve`: time from process start to its "serving"
line, for one or more ingot binaries run in alternation (A B A B ...), so a
load change on a shared machine hits every binary alike. Also reports the
process's CPU time (user+sys of the child up to the ready line is not exposed,
so each run's total CPU after a prompt SIGTERM is used: start-up dominates it).

  python3 bench/serve_startup.py --model DIR --runs 15 BIN [BIN ...]
"""
import argparse
import os
import resource
import signal
import socket
import statistics
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_run(binary, model, extra):
    args = [binary, "serve", "--model", model, "--port", str(free_port()), "--ctx", "512", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    ready = None
    for line in p.stdout:
        if "serving" in line and "http://" in line:
            ready = time.perf_counter() - t0
            break
    p.send_signal(signal.SIGTERM)
    p.stdout.close()
    p.wait(timeout=30)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if ready is None:
        raise SystemExit(f"{binary}: no serving line")
    return ready, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--extra", default="", help="extra serve arguments, space separated")
    ap.add_argument("bins", nargs="+")
    a = ap.parse_args()
    extra = a.extra.split()
    res = {b: [] for b in a.bins}
    for b in a.bins:  # warm the page cache once
        one_run(b, a.model, extra)
    for _ in range(a.runs):
        for b in a.bins:
            res[b].append(one_run(b, a.model, extra))
    print(f"load average at end: {os.getloadavg()}")
    for b in a.bins:
        wall = [r[0] for r in res[b]]
        cpu = [r[1] for r in res[b]]
        print(f"{b}: ready median {statistics.median(wall):.3f} s (min {min(wall):.3f}, max {max(wall):.3f}), "
              f"process CPU median {statistics.median(cpu):.3f} s (min {min(cpu):.3f}) over {len(wall)} runs")


if __name__ == "__main__":
    main()
