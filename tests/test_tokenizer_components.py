"""Every normalizer, pre-tokenizer, split behaviour, added-token option and
decoder, checked against the Rust `tokenizers` library: the Mistral tokenizer
(SentencePiece-style BPE with byte fallback) with one component swapped per
case, encoded and decoded by both on a slice of the corpus."""
import json
import pathlib
import subprocess

import pytest
from tokenizers import Tokenizer

CORPUS = pathlib.Path(__file__).resolve().parent / "data" / "tokenizer_corpus.json"
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
BEHAVIORS = ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]
META_DEC = {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]}


def added(content, tid, **kw):
    t = {"id": tid, "content": content, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": False}
    t.update(kw)
    return t


CASES = {}
for b in BEHAVIORS:
    for inv in (False, True):
        CASES[f"split-regex-{b}-{inv}"] = {"pre_tokenizer": {"type": "Split", "pattern": {"Regex": GPT2},
                                                             "behavior": b, "invert": inv}}
    CASES[f"split-string-{b}"] = {"normalizer": None, "pre_tokenizer": {"type": "Split", "pattern": {"String": " "},
                                                                        "behavior": b, "invert": False}}
    CASES[f"punctuation-{b}"] = {"pre_tokenizer": {"type": "Punctuation", "behavior": b}}
for scheme in ("always", "first", "never"):
    for split in (True, False):
        CASES[f"metaspace-{scheme}-{split}"] = {
            "normalizer": None,
            "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split},
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split},
                {"type": "ByteFallback"}, {"type": "Fuse"}]}}
CASES.update({
    "digits-individual": {"pre_tokenizer": {"type": "Digits", "individual_digits": True}},
    "digits-contiguous": {"pre_tokenizer": {"type": "Digits", "individual_digits": False}},
    "whitespace": {"normalizer": None, "pre_tokenizer": {"type": "Whitespace"}},
    "whitespace-split": {"normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"}},
    "bert-pre": {"normalizer": None, "pre_tokenizer": {"type": "BertPreTokenizer"}},
    "char-delimiter": {"normalizer": None, "pre_tokenizer": {"type": "CharDelimiterSplit", "delimiter": "e"}},
    "byte-level": {"normalizer": None,
                   "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                     "use_regex": True},
                   "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}},
    "sequence-pre": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, {"type": "Punctuation", "behavior": "Isolated"}]}},
    "nfd": {"normalizer": {"type": "NFD"}},
    "nfkc": {"normalizer": {"type": "NFKC"}},
    "nfkd": {"normalizer": {"type": "NFKD"}},
    "lowercase": {"normalizer": {"type": "Sequence", "normalizers": [{"type": "Lowercase"},
                                                                     {"type": "Replace", "pattern": {"String": " "},
                                                                      "content": "▁"}]}},
    "strip": {"normalizer": {"type": "Sequence", "normalizers": [{"type": "Strip", "strip_left": True,
                                                                  "strip_right": True},
                                                                 {"type": "Prepend", "prepend": "▁"}]}},
    "strip-accents": {"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}]}},
    "replace-regex": {"normalizer": {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": "▁"}},
    "bert-normalizer": {"normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                                       "strip_accents": None, "lowercase": True}},
    "no-decoder": {"decoder": None},
    "truncation-right": {"truncation": {"direction": "Right", "max_length": 7, "strategy": "LongestFirst",
                                        "stride": 0}},
    "truncation-left-padding": {
        "truncation": {"direction": "Left", "max_length": 9, "strategy": "LongestFirst", "stride": 0},
        "padding": {"strategy": {"Fixed": 9}, "direction": "Left", "pad_to_multiple_of": None, "pad_id": 2,
                    "pad_type_id": 0, "pad_token": "</s>"}},
    "padding-multiple": {"padding": {"strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": 8,
                                     "pad_id": 0, "pad_type_id": 0, "pad_token": "<unk>"}},
    "decoder-strip-replace": {"decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"Regex": "▁+"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 2, "stop": 1}]}},
    "added-tokens": {
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Lowercase"}, {"type": "Prepend", "prepend": "▁"},
                                                           {"type": "Replace", "pattern": {"String": " "},
                                                            "content": "▁"}]},
        "extra_added": [added("[MASK]", 32000, lstrip=True, special=True), added("<sep>", 32001, rstrip=True),
                        added("hello", 32002, single_word=True, normalized=True),
                        added("World", 32003, normalized=True), added("<|im_start|>", 32004, special=True),
                        added("ab", 32005, lstrip=True, rstrip=True, single_word=True),
                        added("<|im", 32006), added("\n\n", 32007), added("😀", 32008, normalized=True)]},
})


@pytest.fixture(scope="module")
def texts():
    corpus = json.loads(CORPUS.read_text())
    extra = ["hello world", "Hello, hello! ahello hellob", "x [MASK] y  [MASK]z", "a <sep>   b<sep>", "World WORLD",
             "ab cab abc ab", "<|im_start|><|im x", "1\n\n\n2", "😀😀", "  [MASK]  <sep>  "]
    return extra + corpus[:250]


@pytest.fixture(scope="module")
def base(shared_dir):
    path = shared_dir / "assets" / "tokenizers" / "mistral-7b" / "tokenizer.json"
    assert path.is_file()
    return json.loads(path.read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_component_matches_reference(ingot_bin, base, texts, tmp_path, case):
    spec = dict(CASES[case])
    tj = json.loads(json.dumps(base))
    tj["added_tokens"] = tj["added_tokens"] + spec.pop("extra_added", [])
    tj.update(spec)
    (tmp_path / "tokenizer.json").write_text(json.dumps(tj))
    ref = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    # One encode() per string: encode_batch would pad to the longest of the batch.
    expected = [ref.encode(t, add_special_tokens=True).ids for t in texts]
    r = subprocess.run([ingot_bin, "tokenize", "--tokenizer", str(tmp_path), "--add-special"],
                       input=json.dumps(texts), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    bad = [(t, e, g) for t, e, g in zip(texts, expected, got) if e != g]
    assert not bad, f"{len(bad)} differ, e.g. {bad[:2]}"
    r = subprocess.run([ingot_bin, "tokenize", "--tokenizer", str(tmp_path), "--decode"],
                       input=json.dumps(expected), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    want = ref.decode_batch(expected, skip_special_tokens=False)
    bad = [(t, w, g) for t, w, g in zip(texts, want, json.loads(r.stdout)) if w != g]
    assert not bad, f"{len(bad)} decodes differ, e.g. {bad[:2]}"


@pytest.mark.parametrize("section,value,needle", [
    ("model", {"type": "Unigram", "vocab": []}, "Unigram"),
    ("normalizer", {"type": "Precompiled", "precompiled_charsmap": ""}, "Precompiled"),
    ("pre_tokenizer", {"type": "Frobnicate"}, "Frobnicate"),
    ("decoder", {"type": "CTC"}, "CTC"),
])
def test_unknown_component_is_named(ingot_bin, base, tmp_path, section, value, needle):
    tj = dict(base)
    tj[section] = value
    (tmp_path / "tokenizer.json").write_text(json.dumps(tj))
    r = subprocess.run([ingot_bin, "tokenize", "--tokenizer", str(tmp_path)], input="[]", capture_output=True,
                       text=True)
    assert r.returncode != 0
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
