"""A 2-layer random-weight llama (hidden 64, float32) for end-to-end tests:
its config.json dict and its tensors, from one seed."""
import numpy as np

HIDDEN, LAYERS, HEADS, KV_HEADS, INTER = 64, 2, 4, 2, 128


def tiny_llama(vocab: int, eos, seed: int = 0):
    """(config, tensors): embeddings and head at std 1.0, every projection at 0.3, unit norms."""
    head_dim = HIDDEN // HEADS
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab,
        "hidden_size": HIDDEN, "intermediate_size": INTER, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": head_dim,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "hidden_act": "silu", "torch_dtype": "float32",
        "eos_token_id": eos, "bos_token_id": None,
    }
    rng = np.random.default_rng(seed)

    def w(*shape, std=0.3):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    t = {"model.embed_tokens.weight": w(vocab, HIDDEN, std=1.0), "model.norm.weight": np.ones(HIDDEN, np.float32),
         "lm_head.weight": w(vocab, HIDDEN, std=1.0)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        t[p + "self_attn.q_proj.weight"] = w(HEADS * head_dim, HIDDEN)
        t[p + "self_attn.k_proj.weight"] = w(KV_HEADS * head_dim, HIDDEN)
        t[p + "self_attn.v_proj.weight"] = w(KV_HEADS * head_dim, HIDDEN)
        t[p + "self_attn.o_proj.weight"] = w(HIDDEN, HEADS * head_dim)
        t[p + "mlp.gate_proj.weight"] = w(INTER, HIDDEN)
        t[p + "mlp.up_proj.weight"] = w(INTER, HIDDEN)
        t[p + "mlp.down_proj.weight"] = w(HIDDEN, INTER)
    return config, t
