#!/usr/bin/env python3
"""Float references for bench/gpu/compare_logits.py: SmolLM2's GGUF dequantized by the `gguf`
package and run in float32 numpy (tests/gguf_reference.py), written in the `logits` verb's
safetensors layout (prompt_logits [T, V], step_logits [N-1, V], greedy_ids [N]).

    smollm2_float_golden.py GGUF OUT_DIR NAME=IDS [NAME=IDS ...]   (IDS: 1,2,3)"""
import json, pathlib, struct, sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests"))
from gguf_reference import GgufLlama  # noqa: E402

STEPS = 16


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": {"float32": "F32", "int32": "I32"}[str(a.dtype)], "shape": list(a.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    ref = GgufLlama(sys.argv[1])
    out = pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for spec in sys.argv[3:]:
        name, ids = spec.split("=")
        prompt, greedy, steps = ref.greedy([int(i) for i in ids.split(",")], STEPS)
        write_safetensors(out / f"{name}.safetensors",
                          {"prompt_logits": prompt.astype(np.float32), "step_logits": steps[1:].astype(np.float32),
                           "greedy_ids": np.asarray(greedy, dtype=np.int32)})
        print(name, "greedy", greedy)


if __name__ == "__main__":
    main()
