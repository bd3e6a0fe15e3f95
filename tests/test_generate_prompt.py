"""`ingot generate --prompt`: the text prompt is tokenized with the model
directory's tokenizer and the streamed continuation equals the reference
decode of the ids that `--prompt-ids` generates from the same prompt."""
import json
import subprocess

from tokenizers import Tokenizer


def byte_level_tokenizer(vocab_size):
    # Byte-level alphabet (GPT-2 table) plus doubled characters up to vocab_size.
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = list(bs), 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    chars = [chr(c) for _, c in sorted(zip(bs, cs))]
    vocab = {c: i for i, c in enumerate(chars)}
    merges = []
    for c in chars[: vocab_size - 256]:
        vocab[c + c] = len(vocab)
        merges.append([c, c])
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True}
    return {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": bl, "post_processor": None,
            "decoder": bl, "model": {"type": "BPE", "vocab": vocab, "merges": merges}}


def test_prompt_text_round_trip(ingot_bin, shared_dir, tmp_path):
    golden = shared_dir / "goldens" / "qwen3-float32"
    assert golden.is_dir()
    for f in golden.iterdir():
        (tmp_path / f.name).symlink_to(f)
    vocab = json.loads((golden / "config.json").read_text())["vocab_size"]
    (tmp_path / "tokenizer.json").write_text(json.dumps(byte_level_tokenizer(vocab)))
    ref = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    prompt = "hello wörld, aa bb"
    ids = ref.encode(prompt).ids
    common = ["generate", "--model", str(tmp_path), "--max-tokens", "8", "--ignore-eos"]
    r = subprocess.run([ingot_bin, *common, "--prompt-ids", ",".join(map(str, ids))], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    generated = [int(x) for x in r.stdout.strip().split(",")]
    assert len(generated) == 8
    r = subprocess.run([ingot_bin, *common, "--prompt", prompt], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == ref.decode(generated) + "\n"
    r = subprocess.run([ingot_bin, *common, "--prompt", "x", "--prompt-ids", "1"], capture_output=True, text=True)
    assert r.returncode != 0 and "one of" in r.stderr
