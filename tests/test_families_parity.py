"""PARITY.md for the newer families through the real CLI: every gemma2,
gemma3, gemma4, qwen3_moe, qwen3_next and qwen3_5 golden (float32 and
bfloat16), judged by the shared checker."""
import subprocess
import sys

import pytest

FAMILIES = ["gemma2", "gemma3", "gemma4", "qwen3_moe", "qwen3_next", "qwen3_5"]


@pytest.mark.parametrize("family", FAMILIES)
def test_family_goldens_within_parity(ingot_bin, shared_dir, family):
    r = subprocess.run([sys.executable, str(shared_dir / "tools" / "parity_check.py"), ingot_bin,
                        "--only", family], capture_output=True, text=True, timeout=300)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2/2 goldens" in r.stdout, r.stdout


def test_generate_runs_hybrid_and_gemma4(ingot_bin, shared_dir):
    # `generate` drives the same forward + cache path as `logits`; its greedy
    # tokens must equal the golden continuation on the float32 goldens.
    import json
    for case in ["qwen3_5-float32", "gemma4-float32", "qwen3_next-float32"]:
        d = shared_dir / "goldens" / case
        g = json.loads((d / "golden.json").read_text())
        n = len(g["greedy_ids"])
        r = subprocess.run([ingot_bin, "generate", "--model", str(d), "--prompt-ids",
                            ",".join(map(str, g["input_ids"])), "--max-tokens", str(n), "--ignore-eos"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        got = [int(t) for t in r.stdout.strip().split(",")]
        assert got == g["greedy_ids"], case
