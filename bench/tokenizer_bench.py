"""Tokenizer encoding throughput, ingot vs the Rust `tokenizers` library, in one
run on one thread: builds >= 1 MB of mixed text (the parity corpus generator
with another seed, joined into ~2 KB documents), checks both produce the same
ids, prints MB/s for each and the ratio.

usage: python3 bench/tokenizer_bench.py BUILD_DIR SHARED_DIR [names...]"""
import json
import os
import pathlib
import random
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from make_tokenizer_corpus import make  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402


def documents(min_bytes=1_200_000):
    rng = random.Random(7)
    pieces = make(count=40000, seed=99)
    docs, cur, total = [], [], 0
    for p in pieces:
        cur.append(p)
        if sum(len(x) for x in cur) > 2000:
            docs.append(rng.choice(["\n", " ", "\n\n"]).join(cur))
            total += len(docs[-1].encode())
            cur = []
        if total >= min_bytes:
            break
    return docs


def fnv(ids_lists):
    h = 1469598103934665603
    for ids in ids_lists:
        for i in ids:
            h = ((h ^ i) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    build, shared = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    names = sys.argv[3:] or ["qwen3", "llama3_1"]
    docs = documents()
    nbytes = sum(len(d.encode()) for d in docs)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(docs, f)
        path = f.name
    print(f"text: {len(docs)} documents, {nbytes / 1e6:.2f} MB")
    for name in names:
        d = shared / "assets" / "tokenizers" / name
        r = subprocess.run([str(build / "bench" / "bench_tokenizer"), str(d), path, "3"], capture_output=True,
                           text=True, check=True)
        ours = json.loads(r.stdout)
        ref = Tokenizer.from_file(str(d / "tokenizer.json"))
        times, ids = [], None
        for _ in range(3):
            t0 = time.perf_counter()
            ids = [ref.encode(doc, add_special_tokens=False).ids for doc in docs]
            times.append(time.perf_counter() - t0)
        same = fnv(ids) == ours["checksum"]
        mb = nbytes / 1e6
        print(f"{name}: ingot {mb / ours['best_s']:.2f} MB/s (first pass {mb / ours['first_s']:.2f}), "
              f"tokenizers {mb / min(times):.2f} MB/s (first pass {mb / times[0]:.2f}), "
              f"ratio {min(times) / ours['best_s']:.2f}x, {ours['tokens']} tokens, ids identical: {same}")
    os.unlink(path)


if __name__ == "__main__":
    main()
