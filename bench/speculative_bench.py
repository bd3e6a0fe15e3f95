#!/usr/bin/env python3
"""Single-stream decode speed with speculative decoding on and off, in the same run.

Starts `ingot serve MODEL --speculative ngram` (or `draft --draft-model D`; plus any --serve-arg) and sends each task of
tests/grounded_prompts.py (input-grounded: summarise / extract / edit a ~1k-token document, a code
edit) and free chat, one request at a time, alternately with speculation on and off (the
request field `speculative: false` turns it off for one request, so both run in one process
under the same load). A round runs every task in both modes, the order of on/off swapping each
round. Greedy, streamed; decode speed = (completion tokens - 1) / (last token time - first token
time). Checks that both modes give the same text, and reports per task the median decode tok/s of
each mode, the median over rounds of the on/off ratio of the round's two runs (adjacent in time,
so a change of load between rounds cancels), and the draft tokens verified and kept (the usage of
each response).

    python3 bench/speculative_bench.py build/src/cli/ingot MODEL.gguf --rounds 5 --max-tokens 192
"""
import argparse
import json
import pathlib
import socket
import statistics
import subprocess
import sys
import threading
import time

import requests

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from grounded_prompts import FREE_CHAT, grounded_tasks  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(binary, model, extra):
    port = free_port()
    proc = subprocess.Popen([binary, "serve", "--model", model, "--port", str(port), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ready = threading.Event()
    lines = []

    def pump():
        for line in proc.stdout:
            lines.append(line)
            if "serving" in line and "http://" in line:
                ready.set()
    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(120):
        proc.kill()
        sys.exit("ingot serve did not start:\n" + "".join(lines))
    return proc, f"http://127.0.0.1:{port}"


def run_one(url, message, speculative, max_tokens):
    body = {"messages": [{"role": "user", "content": message}], "temperature": 0, "max_tokens": max_tokens,
            "stream": True, "stream_options": {"include_usage": True}, "speculative": speculative}
    sent = time.perf_counter()
    arrivals, text, usage = [], [], None
    with requests.post(url + "/v1/chat/completions", json=body, stream=True, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                usage = ev["usage"]
            for ch in ev.get("choices", []):
                piece = ch.get("delta", {}).get("content")
                if piece:
                    arrivals.append(time.perf_counter())
                    text.append(piece)
    n = usage["completion_tokens"]
    decode_s = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else float("nan")
    details = usage.get("completion_tokens_details", {})
    return {"text": "".join(text), "tokens": n, "ttft_s": arrivals[0] - sent if arrivals else float("nan"),
            "decode_tok_s": (n - 1) / decode_s if decode_s > 0 else float("nan"),
            "accepted": details.get("accepted_prediction_tokens", 0),
            "rejected": details.get("rejected_prediction_tokens", 0)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("model")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=192)
    ap.add_argument("--only", default="", help="comma-separated task names (summarise, extract, edit, code-edit, chat-N)")
    ap.add_argument("--speculative", default="ngram", help="ngram, or draft (with --draft-model)")
    ap.add_argument("--draft-model", help="the draft model for --speculative draft")
    ap.add_argument("--serve-arg", action="append", default=[], help="extra argument for ingot serve (repeatable)")
    ap.add_argument("--json", help="write every run here")
    args = ap.parse_args()

    tasks = grounded_tasks() + [(f"chat-{i}", m) for i, m in enumerate(FREE_CHAT)]
    if args.only:
        keep = set(args.only.split(","))
        tasks = [t for t in tasks if t[0] in keep]
    extra = ["--speculative", args.speculative] + (["--draft-model", args.draft_model] if args.draft_model else [])
    proc, url = start_server(args.binary, args.model, extra + args.serve_arg)
    runs = {name: {True: [], False: []} for name, _ in tasks}
    mismatches = []
    try:
        for name, message in tasks:  # warm-up: the prefix cache then holds every prompt in both modes alike
            run_one(url, message, True, 8)
        for rnd in range(args.rounds):
            for name, message in tasks:
                for spec in ((True, False) if rnd % 2 == 0 else (False, True)):
                    r = run_one(url, message, spec, args.max_tokens)
                    runs[name][spec].append(r)
                    print(f"round {rnd + 1} {name:10s} {'on ' if spec else 'off'} {r['decode_tok_s']:7.2f} tok/s "
                          f"{r['tokens']:4d} tokens, kept {r['accepted']}/{r['accepted'] + r['rejected']} drafts",
                          file=sys.stderr, flush=True)
                on, off = runs[name][True][-1]["text"], runs[name][False][-1]["text"]
                if on != off:
                    mismatches.append(name)
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    print("| task | tokens | off tok/s | on tok/s | on/off (median of rounds) | drafts kept / verified |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    summary = {}
    for name, _ in tasks:
        off = statistics.median(r["decode_tok_s"] for r in runs[name][False])
        on = statistics.median(r["decode_tok_s"] for r in runs[name][True])
        kept = sum(r["accepted"] for r in runs[name][True])
        verified = kept + sum(r["rejected"] for r in runs[name][True])
        tokens = runs[name][True][0]["tokens"]
        ratio = statistics.median(a["decode_tok_s"] / b["decode_tok_s"]
                                  for a, b in zip(runs[name][True], runs[name][False]))
        summary[name] = {"off": off, "on": on, "ratio": ratio, "kept": kept, "verified": verified}
        print(f"| {name} | {tokens} | {off:.2f} | {on:.2f} | {ratio:.2f}x | {kept} / {verified} |")
    print(f"\nsame text with and without speculation: {'all tasks' if not mismatches else 'NOT ' + str(mismatches)}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"summary": summary, "runs": {
            n: {"on": v[True], "off": v[False]} for n, v in runs.items()}}, indent=1))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
