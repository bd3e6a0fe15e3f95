"""Small random-weight checkpoints for the registry tests."""
import json

import numpy as np
from safetensors.numpy import save


def tiny_llama_files(seed: int = 0, vocab: int = 256) -> dict:
    """config.json + model.safetensors of a 2-layer llama (hidden 64, float32), no tokenizer."""
    hidden, layers, heads, kv_heads, inter = 64, 2, 4, 2, 128
    head_dim = hidden // heads
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab,
        "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "hidden_act": "silu", "torch_dtype": "float32",
        "eos_token_id": vocab - 1, "bos_token_id": None,
    }
    rng = np.random.default_rng(seed)

    def w(*shape, std=0.3):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    t = {"model.embed_tokens.weight": w(vocab, hidden, std=1.0), "model.norm.weight": np.ones(hidden, np.float32),
         "lm_head.weight": w(vocab, hidden, std=1.0)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = np.ones(hidden, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(hidden, np.float32)
        t[p + "self_attn.q_proj.weight"] = w(heads * head_dim, hidden)
        t[p + "self_attn.k_proj.weight"] = w(kv_heads * head_dim, hidden)
        t[p + "self_attn.v_proj.weight"] = w(kv_heads * head_dim, hidden)
        t[p + "self_attn.o_proj.weight"] = w(hidden, heads * head_dim)
        t[p + "mlp.gate_proj.weight"] = w(inter, hidden)
        t[p + "mlp.up_proj.weight"] = w(inter, hidden)
        t[p + "mlp.down_proj.weight"] = w(hidden, inter)
    n_params = sum(a.size for a in t.values())
    return {"config.json": json.dumps(config).encode(), "model.safetensors": save(t),
            "README.md": b"# tiny\n", "generation_config.json": json.dumps({"eos_token_id": vocab - 1}).encode(),
            "sub/notes.txt": b"nested file\n"}, n_params
