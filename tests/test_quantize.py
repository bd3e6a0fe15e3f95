"""`ingot quantize`: 8-bit affine copies of float32 goldens against the float
goldens hold PARITY.md's KV8 bar, rel <= 2e-2 (measured 1.6e-2 llama, 1.8e-2
qwen3; the 8-bit kernel keeps activations in float32); greedy tokens follow PARITY.md's bfloat16
rule (at the first divergence each token is in the other's top-5): the
random-weight goldens have tiny top-1 margins. 4-bit copies
load and stay close."""
import json
import subprocess

import numpy as np
import pytest
from safetensors.numpy import load_file


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("case,bits,tol", [("llama-float32", 8, 2e-2), ("qwen3-float32", 8, 2e-2),
                                           ("llama-float32", 4, 0.35)])
def test_affine_quantized_golden(ingot_bin, shared_dir, tmp_path, case, bits, tol):
    src = shared_dir / "goldens" / case
    dst = tmp_path / f"{case}-{bits}"
    subprocess.run([ingot_bin, "quantize", str(src), str(dst), "--bits", str(bits), "--group-size", "32"], check=True)
    cfg = json.loads((dst / "config.json").read_text())
    assert cfg["quantization"] == {"group_size": 32, "bits": bits}
    q = load_file(str(dst / "model.safetensors"))
    assert any(k.endswith(".scales") for k in q) and q["model.embed_tokens.weight"].dtype == np.uint32
    golden = json.loads((src / "golden.json").read_text())
    ref = load_file(str(src / "logits.safetensors"))
    out = tmp_path / "out.safetensors"
    ids = golden["input_ids"]
    subprocess.run([ingot_bin, "logits", "--model", str(dst), "--prompt-ids", ",".join(map(str, ids)),
                    "--steps", str(len(golden["greedy_ids"])), "--out", str(out)], check=True)
    ours = load_file(str(out))
    r = rel(ours["prompt_logits"], ref["prompt_logits"])
    print(case, bits, "prompt rel", r)
    assert r <= tol
    if bits == 8:
        g, g_ref = ours["greedy_ids"].tolist(), golden["greedy_ids"]
        rows = np.concatenate([ours["prompt_logits"][-1:], ours["step_logits"]])
        rows_ref = np.concatenate([ref["prompt_logits"][-1:], ref["step_logits"]])
        if g != g_ref:
            i = next(j for j in range(len(g)) if g[j] != g_ref[j])
            assert g[i] in np.argsort(-rows_ref[i])[:5] and g_ref[i] in np.argsort(-rows[i])[:5], i
        else:
            assert rel(rows, rows_ref) <= tol


def test_bad_arguments(ingot_bin, shared_dir, tmp_path):
    src = shared_dir / "goldens" / "llama-float32"
    for args in (["--bits", "3"], ["--bits", "4", "--group-size", "48"]):
        p = subprocess.run([ingot_bin, "quantize", str(src), str(tmp_path / "x"), *args], capture_output=True, text=True)
        assert p.returncode != 0 and p.stderr.strip()
    p = subprocess.run([ingot_bin, "quantize", str(tmp_path / "missing"), str(tmp_path / "y"), "--bits", "8"],
                       capture_output=True, text=True)
    assert p.returncode != 0 and "not a checkpoint" in p.stderr
