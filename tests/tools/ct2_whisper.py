"""Converts a CTranslate2 Whisper model directory (model.bin, config.json,
tokenizer.json: the format faster-whisper uses) into a transformers-style
Whisper checkpoint (config.json, generation_config.json, model.safetensors,
tokenizer.json) that `ingot transcribe` loads.

The CTranslate2 file is: u32 version, name (u16 length + bytes), u32
revision, u32 variable count, then per variable: name, u8 rank, u32 dims,
u8 dtype, u32 byte count, data; then aliases (name -> variable name).
Attention projections are fused there (self-attention q|k|v, cross-attention
k|v) and are split back here.

Usage: python ct2_whisper.py SRC_DIR DST_DIR
"""
import json
import pathlib
import shutil
import struct
import sys

import numpy as np

DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def read_ct2(path: pathlib.Path) -> dict:
    data = path.read_bytes()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return vals

    def string():
        nonlocal pos
        (n,) = take("H")
        s = data[pos:pos + n].rstrip(b"\0").decode()
        pos += n
        return s

    (version,) = take("I")
    if version < 5:
        raise ValueError(f"{path}: CTranslate2 format version {version} is not supported")
    spec = string()
    if spec != "WhisperSpec":
        raise ValueError(f"{path}: not a Whisper model ({spec})")
    take("I")  # revision
    (count,) = take("I")
    out = {}
    for _ in range(count):
        name = string()
        (rank,) = take("B")
        dims = take("I" * rank) if rank else ()
        (dtype,), (nbytes,) = take("B"), take("I")
        if dtype not in DTYPES:
            raise ValueError(f"{path}: {name}: unsupported dtype code {dtype}")
        arr = np.frombuffer(data, dtype=DTYPES[dtype], count=nbytes // np.dtype(DTYPES[dtype]).itemsize, offset=pos)
        pos += nbytes
        out[name] = arr.reshape(dims) if rank else arr.reshape(())
    (n_alias,) = take("I") if pos < len(data) else (0,)
    for _ in range(n_alias):
        alias, target = string(), string()
        out[alias] = out[target]
    return out


def f32(a):
    return np.ascontiguousarray(a, dtype=np.float32)


def convert(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    v = read_ct2(src / "model.bin")
    ct2_cfg = json.loads((src / "config.json").read_text())
    d = v["decoder/embeddings/weight"].shape[1]
    vocab = v["decoder/embeddings/weight"].shape[0]
    n_enc = sum(1 for k in v if k.startswith("encoder/layer_") and k.endswith("/self_attention/linear_1/weight"))
    n_dec = sum(1 for k in v if k.startswith("decoder/layer_") and k.endswith("/self_attention/linear_1/weight"))
    heads = int(v["encoder/num_heads"]) if "encoder/num_heads" in v else d // 64
    n_mels = v["encoder/conv1/weight"].shape[1]
    t = {}

    def ln(hf, ct):
        t[hf + ".weight"], t[hf + ".bias"] = f32(v[ct + "/gamma"]), f32(v[ct + "/beta"])

    def lin(hf, ct, bias=True):
        t[hf + ".weight"] = f32(v[ct + "/weight"])
        if bias:
            t[hf + ".bias"] = f32(v[ct + "/bias"])

    def split(hf_names, ct, parts):
        w, b = f32(v[ct + "/weight"]), f32(v[ct + "/bias"])
        for i, name in enumerate(hf_names):
            t[name + ".weight"] = np.ascontiguousarray(w[i * d:(i + 1) * d])
            if not name.endswith("k_proj"):  # Whisper's key projections have no bias
                t[name + ".bias"] = np.ascontiguousarray(b[i * d:(i + 1) * d])
        assert w.shape[0] == parts * d, (ct, w.shape)

    for i in (1, 2):
        lin(f"model.encoder.conv{i}", f"encoder/conv{i}")
    t["model.encoder.embed_positions.weight"] = f32(v["encoder/position_encodings/encodings"])
    ln("model.encoder.layer_norm", "encoder/layer_norm")
    for i in range(n_enc):
        p, c = f"model.encoder.layers.{i}.", f"encoder/layer_{i}/"
        ln(p + "self_attn_layer_norm", c + "self_attention/layer_norm")
        split([p + "self_attn.q_proj", p + "self_attn.k_proj", p + "self_attn.v_proj"], c + "self_attention/linear_0", 3)
        lin(p + "self_attn.out_proj", c + "self_attention/linear_1")
        ln(p + "final_layer_norm", c + "ffn/layer_norm")
        lin(p + "fc1", c + "ffn/linear_0")
        lin(p + "fc2", c + "ffn/linear_1")
    t["model.decoder.embed_tokens.weight"] = f32(v["decoder/embeddings/weight"])
    t["model.decoder.embed_positions.weight"] = f32(v["decoder/position_encodings/encodings"])
    ln("model.decoder.layer_norm", "decoder/layer_norm")
    for i in range(n_dec):
        p, c = f"model.decoder.layers.{i}.", f"decoder/layer_{i}/"
        ln(p + "self_attn_layer_norm", c + "self_attention/layer_norm")
        split([p + "self_attn.q_proj", p + "self_attn.k_proj", p + "self_attn.v_proj"], c + "self_attention/linear_0", 3)
        lin(p + "self_attn.out_proj", c + "self_attention/linear_1")
        ln(p + "encoder_attn_layer_norm", c + "attention/layer_norm")
        lin(p + "encoder_attn.q_proj", c + "attention/linear_0")
        split([p + "encoder_attn.k_proj", p + "encoder_attn.v_proj"], c + "attention/linear_1", 2)
        lin(p + "encoder_attn.out_proj", c + "attention/linear_2")
        ln(p + "final_layer_norm", c + "ffn/layer_norm")
        lin(p + "fc1", c + "ffn/linear_0")
        lin(p + "fc2", c + "ffn/linear_1")

    from safetensors.numpy import save_file
    dst.mkdir(parents=True, exist_ok=True)
    save_file(t, str(dst / "model.safetensors"))
    shutil.copy(src / "tokenizer.json", dst / "tokenizer.json")
    tok = json.loads((src / "tokenizer.json").read_text())
    ids = {a["content"]: a["id"] for a in tok["added_tokens"]}
    multilingual = vocab >= 51865
    # Language tokens sit between <|startoftranscript|> and <|translate|>.
    langs = {a["content"]: a["id"] for a in tok["added_tokens"]
             if ids["<|startoftranscript|>"] < a["id"] < ids["<|translate|>"]}
    config = {
        "architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper", "vocab_size": vocab,
        "d_model": d, "encoder_layers": n_enc, "decoder_layers": n_dec, "encoder_attention_heads": heads,
        "decoder_attention_heads": heads, "encoder_ffn_dim": t["model.encoder.layers.0.fc1.weight"].shape[0],
        "decoder_ffn_dim": t["model.decoder.layers.0.fc1.weight"].shape[0], "num_mel_bins": n_mels,
        "max_source_positions": t["model.encoder.embed_positions.weight"].shape[0],
        "max_target_positions": t["model.decoder.embed_positions.weight"].shape[0],
        "activation_function": "gelu", "scale_embedding": False, "tie_word_embeddings": True,
        "decoder_start_token_id": ids["<|startoftranscript|>"], "eos_token_id": ids["<|endoftext|>"],
        "bos_token_id": ids["<|endoftext|>"], "pad_token_id": ids["<|endoftext|>"], "torch_dtype": "float32",
    }
    gen = {
        "decoder_start_token_id": ids["<|startoftranscript|>"], "eos_token_id": ids["<|endoftext|>"],
        "suppress_tokens": ct2_cfg.get("suppress_ids", []), "begin_suppress_tokens": ct2_cfg.get("suppress_ids_begin", []),
        "no_timestamps_token_id": ids["<|notimestamps|>"], "prev_sot_token_id": ids["<|startofprev|>"],
        "max_initial_timestamp_index": 50, "is_multilingual": multilingual,
        "alignment_heads": ct2_cfg.get("alignment_heads", []),
    }
    if multilingual:
        gen["lang_to_id"] = langs
        gen["task_to_id"] = {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]}
    (dst / "config.json").write_text(json.dumps(config, indent=1))
    (dst / "generation_config.json").write_text(json.dumps(gen, indent=1))
    return dst


if __name__ == "__main__":
    convert(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))
