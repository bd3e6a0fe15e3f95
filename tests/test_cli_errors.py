"""Bad input through the CLI: one clear line on stderr and a non-zero exit,
never a crash (PARITY.md's contract for `ingot logits`)."""
import json
import shutil
import struct
import subprocess

import pytest


def run(ingot_bin, *args, timeout=60):
    return subprocess.run([ingot_bin, *args], capture_output=True, text=True, timeout=timeout)


def assert_clean_error(r, needle):
    assert r.returncode not in (0,) and r.returncode > 0, (r.returncode, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    assert needle.lower() in lines[0].lower(), lines[0]


def logits(ingot_bin, model, ids="1,2,3", tmp_path=None, extra=()):
    out = str(tmp_path / "out.safetensors") if tmp_path else "/tmp/ingot-cli-err.safetensors"
    return run(ingot_bin, "logits", "--model", str(model), "--prompt-ids", ids, "--steps", "2", "--out", out, *extra)


@pytest.fixture
def model_copy(tmp_path, shared_dir):
    dst = tmp_path / "model"
    shutil.copytree(shared_dir / "goldens" / "llama-float32", dst)
    return dst


def test_version_and_help(ingot_bin):
    r = run(ingot_bin, "--version")
    assert r.returncode == 0 and r.stdout.startswith("ingot ")
    r = run(ingot_bin, "--help")
    assert r.returncode == 0 and "logits" in r.stdout and "generate" in r.stdout


def test_missing_dir(ingot_bin, tmp_path):
    assert_clean_error(logits(ingot_bin, tmp_path / "nope", tmp_path=tmp_path), "not found")


def test_unknown_model_type(ingot_bin, model_copy, tmp_path):
    cfg = json.loads((model_copy / "config.json").read_text())
    cfg["model_type"] = "frobnicator"
    (model_copy / "config.json").write_text(json.dumps(cfg))
    assert_clean_error(logits(ingot_bin, model_copy, tmp_path=tmp_path), "frobnicator")


def test_ids_out_of_range(ingot_bin, model_copy, tmp_path):
    assert_clean_error(logits(ingot_bin, model_copy, ids="1,512", tmp_path=tmp_path), "out of range")
    assert_clean_error(logits(ingot_bin, model_copy, ids="1,-3", tmp_path=tmp_path), "out of range")
    assert_clean_error(logits(ingot_bin, model_copy, ids="1,x", tmp_path=tmp_path), "not an integer")


def test_truncated_safetensors(ingot_bin, model_copy, tmp_path):
    p = model_copy / "model.safetensors"
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    assert_clean_error(logits(ingot_bin, model_copy, tmp_path=tmp_path), "safetensors")


def test_header_length_past_end(ingot_bin, model_copy, tmp_path):
    p = model_copy / "model.safetensors"
    data = bytearray(p.read_bytes())
    data[0:8] = struct.pack("<Q", len(data) * 4)
    p.write_bytes(bytes(data))
    assert_clean_error(logits(ingot_bin, model_copy, tmp_path=tmp_path), "header")


def rewrite_header(path, mutate):
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    mutate(header)
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + data[8 + n:])


def test_overlapping_offsets(ingot_bin, model_copy, tmp_path):
    def mutate(h):
        names = [k for k in h if k != "__metadata__"]
        a, b = h[names[0]], h[names[1]]
        # b now starts inside a, keeping its length
        length = b["data_offsets"][1] - b["data_offsets"][0]
        b["data_offsets"] = [a["data_offsets"][0], a["data_offsets"][0] + length]
    rewrite_header(model_copy / "model.safetensors", mutate)
    r = logits(ingot_bin, model_copy, tmp_path=tmp_path)
    assert_clean_error(r, "overlap")


def test_out_of_range_offsets(ingot_bin, model_copy, tmp_path):
    def mutate(h):
        name = next(k for k in h if k != "__metadata__")
        a, b = h[name]["data_offsets"]
        h[name]["data_offsets"] = [a + 10**9, b + 10**9]
    rewrite_header(model_copy / "model.safetensors", mutate)
    assert_clean_error(logits(ingot_bin, model_copy, tmp_path=tmp_path), "outside")


def test_dtype_shape_mismatch(ingot_bin, model_copy, tmp_path):
    def mutate(h):
        name = next(k for k in h if k != "__metadata__")
        h[name]["shape"] = [h[name]["shape"][0] + 1] + h[name]["shape"][1:]
    rewrite_header(model_copy / "model.safetensors", mutate)
    assert_clean_error(logits(ingot_bin, model_copy, tmp_path=tmp_path), "bytes")


def test_bad_flag_values(ingot_bin, model_copy, tmp_path):
    assert_clean_error(logits(ingot_bin, model_copy, tmp_path=tmp_path, extra=("--device", "tpu")), "device")
    assert_clean_error(logits(ingot_bin, model_copy, tmp_path=tmp_path, extra=("--kv", "weird")), "kv")
    assert_clean_error(logits(ingot_bin, model_copy, tmp_path=tmp_path, extra=("--dtype", "int7")), "dtype")


def test_generate_greedy_matches_golden(ingot_bin, shared_dir):
    g = json.loads((shared_dir / "goldens" / "llama-float32" / "golden.json").read_text())
    r = run(ingot_bin, "generate", "--model", str(shared_dir / "goldens" / "llama-float32"),
            "--prompt-ids", ",".join(map(str, g["input_ids"])), "--max-tokens", str(len(g["greedy_ids"])),
            "--ignore-eos")
    assert r.returncode == 0, r.stderr
    assert [int(x) for x in r.stdout.strip().split(",")] == g["greedy_ids"]


def test_fit_on_a_machine_without_gpu(ingot_bin, shared_dir):
    model = str(shared_dir / "goldens" / "llama-float32")
    r = run(ingot_bin, "fit", model, "--ctx", "64")
    assert r.returncode == 0 and "fits: yes" in r.stdout, r.stdout + r.stderr
    if subprocess.run(["sh", "-c", "command -v nvidia-smi && nvidia-smi -L"], capture_output=True).returncode != 0:
        assert_clean_error(run(ingot_bin, "fit", model, "--ctx", "64", "--device", "cuda"), "no cuda device")
    assert_clean_error(run(ingot_bin, "fit", model, "--ctx", "64", "--device", "tpu"), "device")
