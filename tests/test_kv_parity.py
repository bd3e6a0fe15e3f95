"""KV stores through the real CLI: `--kv paged` (the blocks read in place) and
`--kv paged-gather` are bit-identical to contiguous on every golden and on
SmolLM2 at 4 k tokens, and the shared checker accepts paged / paged-gather /
kv8 on every golden and
kv4 on the cases listed below (the rest are PARITY.md gaps documented in
docs/kv-cache.md); kv4 on bfloat16 is also judged against contiguous
(PARITY.md's KV row)."""
import math
import os
import re
import struct
import subprocess
import sys
import json

import pytest

FAMILIES = ["llama", "llama3-rope", "qwen2", "qwen3"]
ALL = FAMILIES + ["gemma2", "gemma3", "gemma4", "qwen3_moe", "qwen3_next", "qwen3_5"]
# Outside the checker's bars whatever the KV store (docs/models.md).
KNOWN_GAPS = {"qwen3_next-bfloat16"}
# kv4 on bfloat16 goldens is held to the bf16 bar 3e-2 by the checker; these
# meet it (measured 2.2e-2 - 2.8e-2 with rotated rows and the exact open
# block). The others are 3.8e-2 - 7.4e-2 (docs/kv-cache.md): 4-bit noise, and
# for the MoE models, expert flips.
KV4_BF16_OK = {"llama", "llama3-rope", "qwen2", "qwen3", "gemma3", "qwen3_5"}
KV4_F32_GAPS = {"qwen3_next"}


def checker(shared_dir, ingot_bin, kv, only):
    r = subprocess.run([sys.executable, str(shared_dir / "tools" / "parity_check.py"), ingot_bin,
                        "--only", ",".join(only), "--kv", kv], capture_output=True, text=True, timeout=600)
    print(r.stdout)
    lines = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^(ok|FAIL)\s+([\w.-]+):", line)
        if m:
            lines[m.group(2)] = m.group(1) == "ok"
    assert len(lines) == 2 * len(only), r.stdout + r.stderr
    return lines


@pytest.mark.parametrize("kv", ["paged", "paged-gather", "kv8"])
def test_checker_accepts_kv(ingot_bin, shared_dir, kv):
    ok = checker(shared_dir, ingot_bin, kv, ALL)
    assert {c for c, v in ok.items() if not v} == KNOWN_GAPS, ok


def test_checker_accepts_kv4(ingot_bin, shared_dir):
    ok = checker(shared_dir, ingot_bin, "kv4", ALL)
    want = {f"{f}-float32" for f in ALL if f not in KV4_F32_GAPS} | {f"{f}-bfloat16" for f in KV4_BF16_OK}
    assert {c for c, v in ok.items() if v} >= want, ok


def logits(ingot_bin, case, kv, tmp_path):
    g = json.load(open(case / "golden.json"))
    out = tmp_path / f"{case.name}-{kv}.safetensors"
    subprocess.run([ingot_bin, "logits", "--model", str(case), "--prompt-ids", ",".join(map(str, g["input_ids"])),
                    "--steps", str(len(g["greedy_ids"])), "--out", str(out), "--kv", kv],
                   check=True, capture_output=True, timeout=120)
    return out.read_bytes()


def tensors(raw):
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        body = raw[8 + n + a:8 + n + b]
        fmt = {"F32": "f", "I32": "i"}[info["dtype"]]
        out[name] = struct.unpack(f"<{len(body) // 4}{fmt}", body)
    return out


@pytest.mark.parametrize("family", ALL)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_paged_bit_identical_to_contiguous(ingot_bin, shared_dir, tmp_path, family, dtype):
    case = shared_dir / "goldens" / f"{family}-{dtype}"
    assert case.is_dir(), f"missing golden {case}"
    want = logits(ingot_bin, case, "contiguous", tmp_path)
    assert logits(ingot_bin, case, "paged", tmp_path) == want
    assert logits(ingot_bin, case, "paged-gather", tmp_path) == want


def test_smollm2_paged_bit_identical_to_contiguous_at_4k(ingot_bin, tmp_path):
    """A real model over many 256-key chunks: the 4 k prompt in one pass, then decode steps."""
    sys.path.insert(0, os.path.dirname(__file__))
    from smollm2_prompts import smollm2_path
    rng = __import__("random").Random(4)
    ids = [rng.randrange(100, 49000) for _ in range(4096)]
    outs = {}
    for kv in ("contiguous", "paged"):
        out = tmp_path / f"{kv}.safetensors"
        subprocess.run([ingot_bin, "logits", "--model", str(smollm2_path()), "--prompt-ids", ",".join(map(str, ids)),
                        "--steps", "4", "--out", str(out), "--kv", kv], check=True, capture_output=True, timeout=600)
        outs[kv] = out.read_bytes()
    assert outs["paged"] == outs["contiguous"]


@pytest.mark.parametrize("family", FAMILIES)
def test_kv4_bfloat16_within_tolerance_of_contiguous(ingot_bin, shared_dir, tmp_path, family):
    case = shared_dir / "goldens" / f"{family}-bfloat16"
    ref = tensors(logits(ingot_bin, case, "contiguous", tmp_path))
    got = tensors(logits(ingot_bin, case, "kv4", tmp_path))
    a, b = got["prompt_logits"], ref["prompt_logits"]
    rel = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)) / sum(y * y for y in b))
    assert rel <= 8e-2, rel
