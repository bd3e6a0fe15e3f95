"""Writes tests/data/quant_blocks.gguf: random blocks of every GGUF format
ingot runs, each beside its dequantization by the `gguf` package (an
implementation independent of ingot's), as `<type>` and `<type>.expected`."""
import pathlib
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

Q = gguf.GGMLQuantizationType
TYPES = {"q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q4_1": Q.Q4_1, "q4_k": Q.Q4_K, "q5_k": Q.Q5_K, "q6_k": Q.Q6_K}
ROWS, COLS = 3, 512


def random_blocks(qt, rng):
    elems, nbytes = gguf.GGML_QUANT_SIZES[qt]
    n_blocks = ROWS * COLS // elems
    raw = rng.integers(0, 256, size=(n_blocks, nbytes), dtype=np.uint8)
    # Keep the f16 scales finite and moderate: overwrite them with small values.
    def f16(col, lo, hi):
        raw[:, col:col + 2] = rng.uniform(lo, hi, n_blocks).astype(np.float16).view(np.uint8).reshape(-1, 2)
    if qt in (Q.Q8_0, Q.Q4_0):
        f16(0, 0.001, 0.05)
    elif qt == Q.Q4_1:
        f16(0, 0.001, 0.05); f16(2, -0.3, 0.0)
    elif qt in (Q.Q4_K, Q.Q5_K):
        f16(0, 0.0001, 0.005); f16(2, 0.0001, 0.005)
    elif qt == Q.Q6_K:
        f16(208, 0.0001, 0.003)
    return raw.reshape(ROWS, COLS // elems * nbytes)


def main(out):
    rng = np.random.default_rng(1234)
    w = gguf.GGUFWriter(str(out), "llama")
    for name, qt in TYPES.items():
        raw = random_blocks(qt, rng)
        w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qt)
        w.add_tensor(name + ".expected", dequantize(raw, qt).reshape(ROWS, COLS).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    root = pathlib.Path(__file__).resolve().parents[2]
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "tests" / "data" / "quant_blocks.gguf")
