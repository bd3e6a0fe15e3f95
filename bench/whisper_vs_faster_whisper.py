#!/usr/bin/env python3
"""ingot against faster-whisper on the same Whisper checkpoint, files and threads.

Both load the model once, run one untimed warm-up pass over the first file,
then time transcribing every file (English, no timestamps, the default
temperature fallback). Rounds alternate ingot / faster-whisper so that load
from other programs on a shared machine falls on both alike.

  python3 bench/whisper_vs_faster_whisper.py --ct2 CT2_DIR --ingot-model DIR --bench build/bench/whisper_bench \
      --audio a.wav b.wav ... [--rounds 3] [--threads 2] [--beam 1 5] [--precision float32 int8]

CT2_DIR is the CTranslate2 checkpoint (faster-whisper's format); DIR is the same
weights converted for ingot (tests/tools/ct2_whisper.py). Needs `pip install faster-whisper`.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

FW_CHILD = r"""
import json, sys, time
from faster_whisper import WhisperModel
a = json.loads(sys.argv[1])
m = WhisperModel(a["ct2"], device="cpu", compute_type=a["precision"], cpu_threads=a["threads"])
def run(f):
    segs, _ = m.transcribe(f, language="en", beam_size=a["beam"], without_timestamps=True)
    return "".join(s.text for s in segs)
run(a["audio"][0])
total, texts = 0.0, []
c0 = time.process_time()
for f in a["audio"]:
    t0 = time.perf_counter()
    texts.append(run(f))
    total += time.perf_counter() - t0
print(json.dumps({"total": total, "cpu": time.process_time() - c0, "texts": texts}))
"""


def run_faster_whisper(args, beam, precision):
    cfg = {"ct2": args.ct2, "precision": precision, "threads": args.threads, "beam": beam, "audio": args.audio}
    env = dict(os.environ)
    if not args.omp_spin:
        # CTranslate2's OpenMP threads spin while waiting by default; on a loaded machine that made
        # faster-whisper several times slower (and its first call take 10 s), so it gets passive waits.
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    r = subprocess.run([sys.executable, "-c", FW_CHILD, json.dumps(cfg)], capture_output=True, text=True, timeout=1800,
                       env=env)
    if r.returncode != 0:
        sys.exit("faster-whisper failed: " + r.stderr[-2000:])
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return out["total"], out["cpu"]


def run_ingot(args, beam, precision):
    cmd = [args.bench, "--model", args.ingot_model, "--audio", ",".join(args.audio), "--threads", str(args.threads),
           "--beam-size", str(beam), "--weights", precision]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        sys.exit("ingot failed: " + r.stderr[-2000:])
    m = re.search(r"^total ([0-9.]+) s \(cpu ([0-9.]+) s\)", r.stdout, re.M)
    return float(m.group(1)), float(m.group(2))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ct2", required=True)
    p.add_argument("--ingot-model", required=True)
    p.add_argument("--bench", default="build/bench/whisper_bench")
    p.add_argument("--audio", nargs="+", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--beam", type=int, nargs="+", default=[1, 5])
    p.add_argument("--precision", nargs="+", default=["float32", "int8"])
    p.add_argument("--omp-spin", action="store_true", help="leave OpenMP's default (spinning) wait policy to faster-whisper")
    args = p.parse_args()
    print("| setting | ingot wall s (rounds) | faster-whisper wall s (rounds) | wall median ingot / fw | "
          "fw / ingot (wall) | CPU s median ingot / fw | fw / ingot (CPU) |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for precision in args.precision:
        for beam in args.beam:
            ours, theirs = [], []
            for _ in range(args.rounds):
                ours.append(run_ingot(args, beam, precision))
                theirs.append(run_faster_whisper(args, beam, precision))
            mo, mt = statistics.median(x[0] for x in ours), statistics.median(x[0] for x in theirs)
            co, ct = statistics.median(x[1] for x in ours), statistics.median(x[1] for x in theirs)
            print(f"| {precision}, beam {beam} | {', '.join(f'{x[0]:.2f}' for x in ours)} | "
                  f"{', '.join(f'{x[0]:.2f}' for x in theirs)} | {mo:.2f} / {mt:.2f} | {mt / mo:.2f}x | "
                  f"{co:.2f} / {ct:.2f} | {ct / co:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
