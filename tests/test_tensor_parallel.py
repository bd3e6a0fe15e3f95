"""`--tensor-parallel N` through the real CLI: the shared checker's rules hold
on the dense goldens with the model split over 2 and 4 ranks (host
collective), and configurations that cannot be split fail with a clear line."""
import subprocess
import sys

import pytest

DENSE = ["llama", "llama3-rope", "qwen2", "qwen3", "qwen3_moe"]


def checker(shared_dir):
    sys.path.insert(0, str(shared_dir / "tools"))
    import parity_check
    parity_check.HIDDEN = str(shared_dir / "goldens")
    return parity_check


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("family", DENSE)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_goldens_split_over_ranks(ingot_bin, shared_dir, family, dtype, ranks):
    pc = checker(shared_dir)
    case = shared_dir / "goldens" / f"{family}-{dtype}"
    assert case.exists(), f"missing golden {case}"
    ok, msg = pc.check_case(str(ingot_bin), str(case), ["--tensor-parallel", str(ranks)])
    assert ok, msg


@pytest.mark.parametrize("args,needle", [
    (["--tensor-parallel", "3"], "num_attention_heads (4) is not divisible"),
    (["--tensor-parallel", "0"], "at least 1"),
    (["--tensor-parallel", "2", "--device", "cuda"], "--device cpu"),
])
def test_unsplittable_is_a_clear_error(ingot_bin, shared_dir, args, needle):
    r = subprocess.run([str(ingot_bin), "logits", "--model", str(shared_dir / "goldens" / "llama-float32"),
                        "--prompt-ids", "1,2,3", "--steps", "1", "--out", "/dev/null", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert needle in r.stderr, r.stderr


def test_other_families_are_refused(ingot_bin, shared_dir):
    r = subprocess.run([str(ingot_bin), "logits", "--model", str(shared_dir / "goldens" / "gemma3-float32"),
                        "--prompt-ids", "1,2,3", "--steps", "1", "--out", "/dev/null", "--tensor-parallel", "2"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "tensor parallelism is not supported" in r.stderr, r.stderr
