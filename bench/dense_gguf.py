#!/usr/bin/env python3
"""Writes a copy of a GGUF file with every quantized tensor dequantized to F16 or F32 (metadata,
tokenizer and tensor names unchanged), e.g. SmolLM2 at f16 as the target that its own Q4_1 file
drafts for in bench/speculative_bench.py. Uses the `gguf` package.

    python3 bench/dense_gguf.py SmolLM2-135M-Instruct.Q4_1.gguf /tmp/SmolLM2-135M-Instruct.F16.gguf --type f16
"""
import argparse

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import dequantize


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--type", choices=["f16", "f32"], default="f16")
    args = ap.parse_args()
    r = GGUFReader(args.src)
    arch = r.fields["general.architecture"].contents()
    w = GGUFWriter(args.dst, arch)
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == GGUFValueType.ARRAY else None
        w.add_key_value(key, field.contents(), vtype, sub)
    dense = np.float16 if args.type == "f16" else np.float32
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape)]
        values = dequantize(t.data, t.tensor_type).reshape(shape)
        # Norm weights stay float32, as converters write them.
        keep_f32 = t.tensor_type == GGMLQuantizationType.F32
        w.add_tensor(t.name, values.astype(np.float32 if keep_f32 else dense))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
