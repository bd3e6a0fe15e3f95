"""Tokenizer parity with the Rust `tokenizers` library (PyPI) through the real
CLI (`ingot tokenize`, PARITY.md): identical ids on every corpus string for
every tokenizer in shared/assets/tokenizers, with and without special tokens;
streamed decoding identical to the reference decode, with and without
skip_special_tokens; bad input rejected with one clear line."""
import json
import pathlib
import subprocess

import pytest
from tokenizers import Tokenizer

CORPUS = pathlib.Path(__file__).resolve().parent / "data" / "tokenizer_corpus.json"
NAMES = ["qwen3", "llama3_1", "gemma3", "mistral-7b"]


@pytest.fixture(scope="module")
def corpus():
    texts = json.loads(CORPUS.read_text())
    assert len(texts) >= 5000
    return texts


def run_ingot(ingot_bin, args, payload):
    r = subprocess.run([ingot_bin, "tokenize", *args], input=json.dumps(payload), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def tokenizer_dir(shared_dir, name):
    d = shared_dir / "assets" / "tokenizers" / name
    assert (d / "tokenizer.json").is_file(), f"missing tokenizer {d}"
    return d


def first_mismatches(texts, expected, got, limit=3):
    bad = [(t, e, g) for t, e, g in zip(texts, expected, got) if e != g]
    return len(bad), bad[:limit]


@pytest.mark.parametrize("name", NAMES)
def test_encode_and_stream_decode_match_reference(ingot_bin, shared_dir, corpus, name):
    d = tokenizer_dir(shared_dir, name)
    ref = Tokenizer.from_file(str(d / "tokenizer.json"))
    for add in (False, True):
        got = run_ingot(ingot_bin, ["--tokenizer", str(d)] + (["--add-special"] if add else []), corpus)
        assert len(got) == len(corpus)
        expected = [e.ids for e in ref.encode_batch(corpus, add_special_tokens=add)]
        n, examples = first_mismatches(corpus, expected, got)
        assert n == 0, f"{name} add_special={add}: {n} strings differ, e.g. {examples}"
    # Decode the reference ids (special tokens included) incrementally.
    for skip in (False, True):
        args = ["--tokenizer", str(d), "--decode", "--stream"] + (["--skip-special"] if skip else [])
        got = run_ingot(ingot_bin, args, expected)
        want = ref.decode_batch(expected, skip_special_tokens=skip)
        n, examples = first_mismatches(corpus, want, got)
        assert n == 0, f"{name} skip_special={skip}: {n} decodes differ, e.g. {examples}"


def test_byte_level_round_trip(ingot_bin, shared_dir, corpus):
    # Llama 3.1 has no normalizer: decoding the ids must give back the exact text.
    d = tokenizer_dir(shared_dir, "llama3_1")
    ids = run_ingot(ingot_bin, ["--tokenizer", str(d)], corpus)
    assert run_ingot(ingot_bin, ["--tokenizer", str(d), "--decode"], ids) == corpus


@pytest.mark.parametrize("payload,needle", [
    ('{"not": "a list"}', "JSON array"),
    ('["ok", 3]', "not a string"),
    ('["\\ud800"]', "JSON"),
    ('["unterminated', "JSON"),
])
def test_bad_input_is_one_clear_line(ingot_bin, shared_dir, payload, needle):
    d = tokenizer_dir(shared_dir, "qwen3")
    r = subprocess.run([ingot_bin, "tokenize", "--tokenizer", str(d)], input=payload, capture_output=True, text=True)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_invalid_utf8_rejected_like_reference(ingot_bin, shared_dir):
    # The reference takes Python str, which cannot hold invalid UTF-8 or lone
    # surrogates: it refuses them; ingot refuses raw invalid bytes too.
    d = tokenizer_dir(shared_dir, "qwen3")
    ref = Tokenizer.from_file(str(d / "tokenizer.json"))
    with pytest.raises(Exception):
        ref.encode("\ud800")
    r = subprocess.run([ingot_bin, "tokenize", "--tokenizer", str(d)], input=b'["ab\xff\xfe"]', capture_output=True)
    assert r.returncode != 0 and b"UTF-8" in r.stderr, r.stderr


def test_missing_tokenizer_dir(ingot_bin, tmp_path):
    r = subprocess.run([ingot_bin, "tokenize", "--tokenizer", str(tmp_path)], input="[]", capture_output=True,
                       text=True)
    assert r.returncode != 0 and "tokenizer.json" in r.stderr
