"""Random LoRA adapters for a tiny_llama checkpoint, written in PEFT or MLX-LM
format, and the same update merged into a copy of the weights with numpy."""
import json
import pathlib

import numpy as np
from safetensors.numpy import load_file, save_file

BLOCK = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
         "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}
ALL_TARGETS = list(BLOCK)


def random_pairs(tensors: dict, rank: int, targets=ALL_TARGETS, layers=None, seed: int = 1, std: float = 0.2,
                 only_present=False):
    """{(layer, module): (A [r, in], B [out, r])} for projections of `tensors`, B non-zero; with
    `only_present`, projections a layer does not have (Gemma 4's shared K/V layers) are skipped."""
    rng = np.random.default_rng(seed)
    n_layers = 1 + max(int(k.split(".")[2]) for k in tensors if k.startswith("model.layers."))
    out = {}
    for i in (range(n_layers) if layers is None else layers):
        for m in targets:
            name = f"model.layers.{i}.{BLOCK[m]}.{m}.weight"
            if only_present and name not in tensors:
                continue
            w = tensors[name]
            a = (rng.standard_normal((rank, w.shape[1])) * std).astype(np.float32)
            b = (rng.standard_normal((w.shape[0], rank)) * std).astype(np.float32)
            out[(i, m)] = (a, b)
    return out


def write_peft(dst: pathlib.Path, pairs: dict, rank: int, alpha: float, rslora=False, **config) -> pathlib.Path:
    dst.mkdir(parents=True, exist_ok=True)
    t = {}
    for (i, m), (a, b) in pairs.items():
        p = f"base_model.model.model.layers.{i}.{BLOCK[m]}.{m}."
        t[p + "lora_A.weight"], t[p + "lora_B.weight"] = a, b
    cfg = {"peft_type": "LORA", "r": rank, "lora_alpha": alpha, "use_rslora": rslora, "bias": "none",
           "target_modules": sorted({m for _, m in pairs}), "modules_to_save": None, "task_type": "CAUSAL_LM"}
    cfg.update(config)
    (dst / "adapter_config.json").write_text(json.dumps(cfg))
    save_file(t, str(dst / "adapter_model.safetensors"))
    return dst


def write_mlx(dst: pathlib.Path, pairs: dict, rank: int, scale: float) -> pathlib.Path:
    """MLX-LM keeps lora_a as [in, r] and lora_b as [r, out] and multiplies by `scale`."""
    dst.mkdir(parents=True, exist_ok=True)
    t = {}
    for (i, m), (a, b) in pairs.items():
        p = f"model.layers.{i}.{BLOCK[m]}.{m}."
        t[p + "lora_a"], t[p + "lora_b"] = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
    n_layers = len({i for i, _ in pairs})
    cfg = {"fine_tune_type": "lora", "num_layers": n_layers,
           "lora_parameters": {"rank": rank, "scale": scale, "dropout": 0.0,
                               "keys": [f"{BLOCK[m]}.{m}" for m in sorted({m for _, m in pairs})]}}
    (dst / "adapter_config.json").write_text(json.dumps(cfg))
    save_file(t, str(dst / "adapters.safetensors"))
    return dst


def expert_pairs(tensors: dict, layer_experts: dict, modules, rank: int, seed: int, std: float = 0.3) -> dict:
    """{(layer, expert, module): (A, B)} for MoE experts' projections: layer_experts = {layer: expert ids}."""
    rng = np.random.default_rng(seed)
    out = {}
    for i, experts in layer_experts.items():
        for e in experts:
            for m in modules:
                w = tensors[f"model.layers.{i}.mlp.experts.{e}.{m}.weight"]
                out[(i, e, m)] = ((rng.standard_normal((rank, w.shape[1])) * std).astype(np.float32),
                                  (rng.standard_normal((w.shape[0], rank)) * std).astype(np.float32))
    return out


def add_peft_experts(adapter: pathlib.Path, experts: dict):
    """Adds expert pairs (expert_pairs()) to a PEFT adapter written by write_peft()."""
    t = load_file(str(adapter / "adapter_model.safetensors"))
    for (i, e, m), (a, b) in experts.items():
        p = f"base_model.model.model.layers.{i}.mlp.experts.{e}.{m}."
        t[p + "lora_A.weight"], t[p + "lora_B.weight"] = a, b
    save_file(t, str(adapter / "adapter_model.safetensors"))


def merged(tensors: dict, pairs: dict, scale: float, experts: dict = None) -> dict:
    """The base weights with W + scale * B @ A on every adapted projection (float64 product, float32 result),
    experts' projections (expert_pairs()) included."""
    names = {f"model.layers.{i}.{BLOCK[m]}.{m}.weight": ab for (i, m), ab in pairs.items()}
    names.update({f"model.layers.{i}.mlp.experts.{e}.{m}.weight": ab for (i, e, m), ab in (experts or {}).items()})
    out = dict(tensors)
    for k, (a, b) in names.items():
        out[k] = (tensors[k].astype(np.float64) + scale * (b.astype(np.float64) @ a.astype(np.float64))).astype(
            np.float32)
    return out


def to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits (uint16), round to nearest even."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def save_bf16(tensors: dict, path: pathlib.Path):
    """A safetensors file with every tensor stored as BF16 (numpy has no bfloat16 dtype)."""
    header, blobs, offset = {}, [], 0
    for name, x in tensors.items():
        b = to_bf16(x).tobytes()
        header[name] = {"dtype": "BF16", "shape": list(x.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def gguf_shapes(gguf_path) -> tuple:
    """(layers, {module: (out, in)}) of a llama-family GGUF file, from its metadata."""
    from gguf import GGUFReader
    r = GGUFReader(str(gguf_path))
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()

    def meta(key):
        return int(r.fields[f"{arch}.{key}"].parts[-1][0])
    hid, inter, layers = meta("embedding_length"), meta("feed_forward_length"), meta("block_count")
    heads, kv = meta("attention.head_count"), meta("attention.head_count_kv")
    d = hid // heads
    return layers, {"q_proj": (heads * d, hid), "k_proj": (kv * d, hid), "v_proj": (kv * d, hid),
                    "o_proj": (hid, heads * d), "gate_proj": (inter, hid), "up_proj": (inter, hid),
                    "down_proj": (hid, inter)}


def config_shapes(model_dir) -> tuple:
    """The same as gguf_shapes() for a Hugging Face llama-family folder, from its config.json."""
    c = json.loads((pathlib.Path(model_dir) / "config.json").read_text())
    hid, inter, layers = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    heads, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    d = c.get("head_dim", hid // heads)
    return layers, {"q_proj": (heads * d, hid), "k_proj": (kv * d, hid), "v_proj": (kv * d, hid),
                    "o_proj": (hid, heads * d), "gate_proj": (inter, hid), "up_proj": (inter, hid),
                    "down_proj": (hid, inter)}


def pairs_for_shapes(layers: int, mods: dict, rank: int, seed: int, std: float, zero_b=False) -> dict:
    """Random pairs for every projection of every layer of a model described by gguf_shapes()."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(layers):
        for m, (o, n) in mods.items():
            a = (rng.standard_normal((rank, n)) * std).astype(np.float32)
            b = np.zeros((o, rank), np.float32) if zero_b else (rng.standard_normal((o, rank)) * std).astype(np.float32)
            out[(i, m)] = (a, b)
    return out
