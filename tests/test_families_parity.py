"""PARITY.md for the newer families through the real CLI: every gemma2,
gemma3, gemma4, qwen3_moe, qwen3_next and qwen3_5 golden (float32 and
bfloat16), judged by the shared checker, plus `generate` on the same path."""
import json
import re
import subprocess
import sys

import pytest

FAMILIES = ["gemma2", "gemma3", "gemma4", "qwen3_moe", "qwen3_next", "qwen3_5"]
CASES = [f"{f}-{d}" for f in FAMILIES for d in ("float32", "bfloat16")]
# Known gap (docs/models.md): bf16 router near-ties flip experts, logits rel
# 6.2e-2 > 3e-2 while greedy tokens stay identical. strict: passing fails.
KNOWN_GAPS = {"qwen3_next-bfloat16"}


@pytest.fixture(scope="module")
def verdicts(ingot_bin, shared_dir):
    r = subprocess.run([sys.executable, str(shared_dir / "tools" / "parity_check.py"), ingot_bin,
                        "--only", ",".join(FAMILIES)], capture_output=True, text=True, timeout=600)
    print(r.stdout, r.stderr)
    lines = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^(ok|FAIL)\s+([\w.-]+):\s*(.*)$", line)
        if m:
            lines[m.group(2)] = (m.group(1), m.group(3))
    assert set(CASES) <= set(lines), f"checker did not judge every case: {sorted(lines)}"
    return lines


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.xfail(strict=True, reason="bf16 MoE router near-ties (docs/models.md)"))
    if c in KNOWN_GAPS else c for c in CASES])
def test_golden_within_parity(verdicts, case):
    verdict, detail = verdicts[case]
    assert verdict == "ok", f"{case}: {detail}"


def test_known_gap_keeps_greedy_tokens(verdicts):
    for case in KNOWN_GAPS:
        assert "greedy identical" in verdicts[case][1], verdicts[case]


def test_generate_matches_golden_continuation(ingot_bin, shared_dir):
    # `generate` drives the same forward + cache path as `logits`; its greedy
    # tokens must equal the golden continuation on the float32 goldens.
    for fam in FAMILIES:
        d = shared_dir / "goldens" / f"{fam}-float32"
        g = json.loads((d / "golden.json").read_text())
        n = len(g["greedy_ids"])
        r = subprocess.run([ingot_bin, "generate", "--model", str(d), "--prompt-ids",
                            ",".join(map(str, g["input_ids"])), "--max-tokens", str(n), "--ignore-eos"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        got = [int(t) for t in r.stdout.strip().split(",")]
        assert got == g["greedy_ids"], fam
