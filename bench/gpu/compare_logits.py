#!/usr/bin/env python3
"""Compares two `logits` outputs of the same prompt (e.g. --device cpu and cuda), stdlib only.

    compare_logits.py REF.safetensors OTHER.safetensors [--max-rel R]

Prints the relative difference of the prompt logits (sqrt(sum d^2 / sum ref^2), PARITY.md's
measure), the largest absolute difference, whether each prompt row's top-1 agrees, and how
many greedy ids agree before the first divergence. Exits 1 if rel > R or the first greedy id
(chosen from the prompt alone) differs."""
import argparse, json, math, struct, sys


def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        code = {"F32": "f", "I32": "i"}[info["dtype"]]
        out[name] = (info["shape"], struct.unpack(f"<{(b - a) // 4}{code}", data[a:b]))
    return out


def argmax(row):
    return max(range(len(row)), key=lambda i: (row[i], -i))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ref")
    ap.add_argument("other")
    ap.add_argument("--max-rel", type=float, default=5e-2)
    a = ap.parse_args()
    r, o = tensors(a.ref), tensors(a.other)
    (shape, pr), (_, po) = r["prompt_logits"], o["prompt_logits"]
    if len(pr) != len(po):
        print(f"FAIL prompt_logits sizes differ: {len(pr)} vs {len(po)}")
        return 1
    num = sum((x - y) ** 2 for x, y in zip(po, pr))
    den = sum(y * y for y in pr) or 1e-30
    rel = math.sqrt(num / den) if not any(math.isnan(x) for x in po) else float("inf")
    mad = max(abs(x - y) for x, y in zip(po, pr))
    v = shape[-1]
    top = [argmax(pr[i:i + v]) == argmax(po[i:i + v]) for i in range(0, len(pr), v)]
    gr, go = list(r["greedy_ids"][1]), list(o["greedy_ids"][1])
    agree = next((i for i, (x, y) in enumerate(zip(gr, go)) if x != y), min(len(gr), len(go)))
    print(f"prompt logits [{shape[0]} x {v}]: rel {rel:.3e}, max |diff| {mad:.3e}; "
          f"prompt-row top-1 agree {sum(top)}/{len(top)}; greedy ids agree {agree}/{len(gr)}")
    print(f"  greedy ref   {gr}\n  greedy other {go}")
    ok = rel <= a.max_rel and gr[:1] == go[:1]
    print(("PASS" if ok else "FAIL") + f" logits within rel {a.max_rel:g} and the first greedy id agrees")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
