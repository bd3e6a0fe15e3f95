"""SmolLM2-135M Q4_1 GGUF: ingot against llama.cpp (PyPI llama-cpp-python) on
the same file, in one run: tokenization, greedy continuations (32 tokens,
16 prompts), perplexity on tests/data/tale_of_two_cities.txt, and CPU
prefill / decode speed.

usage: python3 bench/gguf_vs_llamacpp.py [--ingot build/src/cli/ingot]
       [--pp 128] [--tg 64] [--threads 2] [--speed-only]
ingot's speed comes from `ingot bench model` (the engine path `ingot serve` runs)."""
import argparse
import json
import math
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np
from llama_cpp import Llama
from safetensors.numpy import load_file

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from smollm2_prompts import PROMPTS, smollm2_path  # noqa: E402
from test_gguf_smollm2 import perplexity, top5  # noqa: E402


def ingot_logits(ingot, model, ids, steps, tmp):
    out = pathlib.Path(tmp) / "o.safetensors"
    subprocess.run([ingot, "logits", "--model", str(model), "--prompt-ids", ",".join(map(str, ids)),
                    "--steps", str(steps), "--out", str(out)], check=True)
    return load_file(str(out))


def llama_greedy(llm, ids, steps):
    llm.reset()
    llm.eval(ids)
    prompt = np.array(llm.scores[: len(ids)], dtype=np.float32)
    lg = prompt[-1]
    out, rows = [], []
    for _ in range(steps):
        rows.append(lg)
        t = int(np.argmax(lg))
        out.append(t)
        llm.eval([t])
        lg = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
    return prompt, out, np.stack(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", default=str(ROOT / "build/src/cli/ingot"))
    ap.add_argument("--pp", type=int, default=128)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--speed-only", action="store_true", help="skip the parity part")
    a = ap.parse_args()
    model = smollm2_path()
    res = {}
    if not a.speed_only:
        res = parity(a, model)
    speed(a, model, res)
    print(json.dumps(res, indent=2))


def parity(a, model):
    llm = Llama(model_path=str(model), n_ctx=1024, n_threads=a.threads, n_batch=512, logits_all=True, verbose=False)
    from tokenizers import Tokenizer
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([a.ingot, "gguf-export", str(model), tmp + "/tok"], check=True)
        tok = Tokenizer.from_file(tmp + "/tok/tokenizer.json")
        texts = PROMPTS + [(ROOT / "tests/data/tale_of_two_cities.txt").read_text()]
        same_tok = sum(tok.encode(t).ids == llm.tokenize(t.encode(), add_bos=False, special=True) for t in texts)
        res["tokenization_identical"] = f"{same_tok}/{len(texts)}"
        identical, top5_ok, first_div = 0, 0, []
        for text in PROMPTS:
            ids = llm.tokenize(text.encode(), add_bos=False, special=True)
            ours = ingot_logits(a.ingot, model, ids, 32, tmp)
            _, g_ref, s_ref = llama_greedy(llm, ids, 32)
            g = ours["greedy_ids"].tolist()
            s_ours = np.concatenate([ours["prompt_logits"][-1:], ours["step_logits"]])
            if g == g_ref:
                identical += 1
                top5_ok += 1
                continue
            i = next(j for j in range(32) if g[j] != g_ref[j])
            first_div.append(i)
            top5_ok += int(g[i] in top5(s_ref[i]) and g_ref[i] in top5(s_ours[i]))
        res["greedy32_identical"] = f"{identical}/{len(PROMPTS)}"
        res["top5_rule_at_divergence"] = f"{top5_ok}/{len(PROMPTS)}"
        res["first_divergence_steps"] = first_div
        ids = llm.tokenize(texts[-1].encode(), add_bos=False, special=True)
        p_ours = perplexity(ingot_logits(a.ingot, model, ids, 1, tmp)["prompt_logits"], ids)
        llm.reset()
        llm.eval(ids)
        p_ref = perplexity(np.array(llm.scores[: len(ids)], dtype=np.float32), ids)
        res["perplexity"] = {"tokens": len(ids), "ingot": round(p_ours, 4), "llama.cpp": round(p_ref, 4),
                             "rel_diff": round(abs(p_ours - p_ref) / p_ref, 5)}

    return res


def speed(a, model, res):
    # Same prompt length and generated tokens; llama.cpp without logits for every position.
    llm = Llama(model_path=str(model), n_ctx=1024, n_threads=a.threads, n_batch=512, verbose=False)
    prompt = [100 + (i * 37) % 5000 for i in range(a.pp)]
    pps, tgs = [], []
    for r in range(a.runs + 1):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        t1 = time.perf_counter()
        for _ in range(a.tg):
            llm.eval([int(np.argmax(llm.scores[llm.n_tokens - 1]))])
        t2 = time.perf_counter()
        if r:
            pps.append(a.pp / (t1 - t0))
            tgs.append(a.tg / (t2 - t1))
    res["llama.cpp"] = {"prefill_tok_s": round(float(np.median(pps)), 2), "decode_tok_s": round(float(np.median(tgs)), 2)}
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([a.ingot, "bench", "model", str(model), "-p", str(a.pp), "-n", str(a.tg), "-r", str(a.runs),
                        "--threads", str(a.threads), "--json", tmp + "/bench.json"], check=True, capture_output=True)
        rows = json.load(open(tmp + "/bench.json"))["results"]
    rate = {r["kind"]: r["tokens_per_s"] for r in rows}
    res["ingot"] = {"prefill_tok_s": round(rate["pp"], 2), "decode_tok_s": round(rate["tg"], 2)}
    res["decode_ratio"] = round(res["ingot"]["decode_tok_s"] / res["llama.cpp"]["decode_tok_s"], 3)
    res["prefill_ratio"] = round(res["ingot"]["prefill_tok_s"] / res["llama.cpp"]["prefill_tok_s"], 3)


if __name__ == "__main__":
    main()
