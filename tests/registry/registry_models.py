"""Small random-weight checkpoints for the registry tests."""
import json
import pathlib
import sys

from safetensors.numpy import save

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
from tiny_llama import tiny_llama  # noqa: E402


def tiny_llama_files(seed: int = 0, vocab: int = 256) -> dict:
    """config.json + model.safetensors of a 2-layer llama (hidden 64, float32), no tokenizer."""
    config, t = tiny_llama(vocab, vocab - 1, seed)
    n_params = sum(a.size for a in t.values())
    return {"config.json": json.dumps(config).encode(), "model.safetensors": save(t),
            "README.md": b"# tiny\n", "generation_config.json": json.dumps({"eos_token_id": vocab - 1}).encode(),
            "sub/notes.txt": b"nested file\n"}, n_params
