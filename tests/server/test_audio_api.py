"""POST /v1/audio/transcriptions and /v1/audio/translations end to end with the
official openai SDK: a speech-only server on the random-weight Whisper golden,
and a chat server with a random multilingual Whisper beside it (--audio-model)."""
import io
import json
import shutil
import struct
import subprocess
import threading
import time
import wave

import numpy as np
import openai
import pytest
import requests

from conftest import Server
from test_web_page import browser, wait_for  # noqa: F401  (the headless Chromium fixture)

RATE = 16000


def wav_bytes(samples, rate=RATE, channels=1, width=2):
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(samples.tobytes())
    return buf.getvalue()


def tone(seconds, rate=RATE, seed=0):
    n = int(round(seconds * rate))
    t = np.arange(n) / rate
    noise = np.random.default_rng(seed).standard_normal(n) * 0.05
    return ((np.sin(2 * np.pi * 440 * t) * 0.3 + noise) * 32767).astype(np.int16)


def wav_ext(fmt_tag, bits, channels, rate, data: bytes, declared=None):
    """A hand-made RIFF/WAVE file: any format tag, and a data size that may lie."""
    block = channels * bits // 8
    fmt = struct.pack("<HHIIHH", fmt_tag, channels, rate, rate * block, block, bits)
    size = len(data) if declared is None else declared
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", size) + data
    return b"RIFF" + struct.pack("<I", 4 + len(body) - 4 + (size - len(data))) + body


def long_mp3(tmp_path):
    """3756 s of 8 kb/s mp3 (3.7 MB): one 10 s encode, its frames repeated."""
    short = tmp_path / "short.mp3"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "anullsrc=r=8000:cl=mono", "-t", "10",
                    "-c:a", "libmp3lame", "-b:a", "8k", "-write_xing", "0", "-id3v2_version", "0", str(short)],
                   check=True, timeout=60)
    return short.read_bytes() * 370


def post(server, files, data=None, path="/v1/audio/transcriptions", **kw):
    return requests.post(server.url + path, files=files, data=data or {}, timeout=120, **kw)


def error_of(r, status=400):
    assert r.status_code == status, (r.status_code, r.text)
    e = r.json()["error"]
    assert set(e) == {"message", "type", "param", "code"} and e["message"]
    assert e["type"] == ("invalid_request_error" if status == 400 else e["type"])
    return e


# A random multilingual Whisper: the golden's weights (vocab 512) with a byte-level
# tokenizer whose special tokens sit at 256..264, so ids 265..511 are timestamps.
SPECIALS = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|fr|>", "<|translate|>", "<|transcribe|>",
            "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>"]


def byte_level_vocab():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


@pytest.fixture(scope="module")
def multilingual_whisper(tmp_path_factory, shared_dir):
    src = shared_dir / "goldens" / "whisper-float32"
    assert (src / "model.safetensors").exists(), f"missing {src}"
    dst = tmp_path_factory.mktemp("whisper-ml")
    for name in ("config.json", "model.safetensors", "preprocessor_config.json"):
        shutil.copy(src / name, dst / name)
    ids = {t: 256 + i for i, t in enumerate(SPECIALS)}
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True} for t, i in ids.items()],
           "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                                 "use_regex": True},
           "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                               "use_regex": True},
           "model": {"type": "BPE", "vocab": byte_level_vocab(), "merges": []}}
    (dst / "tokenizer.json").write_text(json.dumps(tok))
    (dst / "tokenizer_config.json").write_text("{}")
    gen = {"decoder_start_token_id": ids["<|startoftranscript|>"], "eos_token_id": ids["<|endoftext|>"],
           "suppress_tokens": [], "begin_suppress_tokens": [ids["<|endoftext|>"]],
           "lang_to_id": {"<|en|>": ids["<|en|>"], "<|fr|>": ids["<|fr|>"]},
           "task_to_id": {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
           "no_timestamps_token_id": ids["<|notimestamps|>"], "prev_sot_token_id": ids["<|startofprev|>"],
           "max_initial_timestamp_index": 50, "is_multilingual": True}
    (dst / "generation_config.json").write_text(json.dumps(gen))
    return dst


@pytest.fixture(scope="module")
def speech_server(ingot_bin, shared_dir):
    # An hour's cap (the default is 4 h), so the 62-minute mp3 below is refused from its header.
    s = Server(ingot_bin, shared_dir / "goldens" / "whisper-float32", "--audio-queue", "1", "--audio-max-seconds", "3600")
    yield s
    s.stop()
    assert s.proc.returncode in (0, -15), "".join(s.output)


@pytest.fixture(scope="module")
def chat_audio_server(ingot_bin, tiny_model, multilingual_whisper):
    s = Server(ingot_bin, tiny_model, "--audio-model", str(multilingual_whisper))
    yield s
    s.stop()
    assert s.proc.returncode in (0, -15), "".join(s.output)


def sdk(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def jfk(shared_dir):
    p = (shared_dir / "assets" / "audio" / "jfk.wav").resolve()  # the browser wants a canonical path
    assert p.exists(), f"missing {p}"
    return p


def test_speech_only_server_formats(speech_server, jfk):
    c = sdk(speech_server)
    ids = [m.id for m in c.models.list().data]
    assert len(ids) == 1
    assert requests.get(speech_server.url + "/v1/models", timeout=10).json()["data"][0]["audio"] is True
    with open(jfk, "rb") as f:
        r = c.audio.transcriptions.create(model="whisper-1", file=f)
    # The golden has no tokenizer: its text is the generated ids, which random weights make non-empty.
    assert r.text and all(w.isdigit() for w in r.text.split())
    with open(jfk, "rb") as f:
        text = c.audio.transcriptions.create(model=ids[0], file=f, response_format="text")
    assert isinstance(text, str) and text.strip() == r.text
    with open(jfk, "rb") as f:
        v = c.audio.transcriptions.create(model=ids[0], file=f, response_format="verbose_json",
                                          timestamp_granularities=["segment"])
    assert abs(v.duration - 11.0) < 0.1 and v.task == "transcribe" and v.text == r.text
    assert len(v.segments) == 1 and v.segments[0].start == 0 and abs(v.segments[0].end - v.duration) < 1e-6
    with open(jfk, "rb") as f:
        srt = c.audio.transcriptions.create(model=ids[0], file=f, response_format="srt")
    assert srt.startswith("1\n00:00:00,000 --> 00:00:11,000\n") and r.text in srt
    with open(jfk, "rb") as f:
        vtt = c.audio.transcriptions.create(model=ids[0], file=f, response_format="vtt")
    assert vtt.startswith("WEBVTT\n\n00:00:00.000 --> 00:00:11.000\n") and r.text in vtt


def test_speech_only_server_refuses_text_routes(speech_server):
    c = sdk(speech_server)
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="default", messages=[{"role": "user", "content": "hi"}])
    assert "does not support chat" in e.value.body["message"] and e.value.body["code"] == "model_not_supported"
    r = requests.post(speech_server.url + "/v1/completions", json={"prompt": "x"}, timeout=10)
    assert error_of(r)["code"] == "model_not_supported"
    assert requests.get(speech_server.url + "/health", timeout=10).status_code == 200


def test_bad_input(speech_server, tmp_path):
    s = speech_server
    c = sdk(s)
    # Not audio at all, through the SDK.
    with pytest.raises(openai.BadRequestError) as e:
        c.audio.transcriptions.create(model="whisper-1", file=("notes.mp3", b"just some words, not audio" * 10))
    assert e.value.body["param"] == "file"
    cases = {
        "empty file": wav_bytes(np.zeros(0, np.int16))[:0],
        "zero-length wav": wav_bytes(np.zeros(0, np.int16)),
        "0.05 s clip": wav_bytes(tone(0.05)),
        "mp3 of 62 minutes": long_mp3(tmp_path),
        "unknown wav format tag": wav_ext(0x1234, 16, 1, RATE, tone(1.0).tobytes()),
        "truncated header": wav_bytes(tone(1.0))[:30],
        "random bytes": np.random.default_rng(1).integers(0, 256, 50000, dtype=np.uint8).tobytes(),
    }
    for name, data in cases.items():
        r = post(s, {"file": ("clip.wav", data)}, {"model": "whisper-1"})
        assert r.status_code == 400, (name, r.text[:200])
        e = error_of(r)
        assert e["param"] == "file", (name, e)
        if name == "0.05 s clip":
            assert e["code"] == "audio_too_short"
        if name.startswith("mp3 of"):  # refused from the container's duration, before decoding
            assert "3756 s long; the limit is 3600 s" in e["message"], e
    clip = wav_bytes(tone(1.0))
    assert error_of(post(s, {"model": (None, "whisper-1")}))["param"] == "file"  # no file part
    r = requests.post(s.url + "/v1/audio/transcriptions", json={"file": "x", "model": "whisper-1"}, timeout=30)
    assert "multipart/form-data" in error_of(r)["message"]
    r = requests.post(s.url + "/v1/audio/transcriptions", data=b"--nope\r\n\r\nbroken",
                      headers={"Content-Type": "multipart/form-data; boundary=xyz"}, timeout=30)
    assert r.status_code == 400
    fields = [({"response_format": "xml"}, "response_format"), ({"temperature": "hot"}, "temperature"),
              ({"temperature": "1.5"}, "temperature"), ({"stream": "true", "response_format": "srt"}, "stream"),
              ({"stream": "maybe"}, "stream"),
              ({"timestamp_granularities[]": "word", "response_format": "verbose_json"}, "timestamp_granularities"),
              ({"timestamp_granularities[]": "segment"}, "timestamp_granularities"),
              ({"prompt": "earlier words"}, "prompt"), ({"language": "fr"}, "language"),
              ({"beam_size": "0"}, "beam_size"), ({"beam_size": "2.5"}, "beam_size"), ({"best_of": "x"}, "best_of"),
              ({"patience": "-1"}, "patience"), ({"length_penalty": "nan"}, "length_penalty"),
              ({"condition_on_previous_text": "maybe"}, "condition_on_previous_text"),
              ({"vad_filter": "yes please"}, "vad_filter"), ({"no_speech_threshold": "2"}, "no_speech_threshold"),
              ({"log_prob_threshold": "1"}, "log_prob_threshold"),
              ({"timestamp_granularities[]": "character", "response_format": "verbose_json"},
               "timestamp_granularities")]
    for data, param in fields:
        e = error_of(post(s, {"file": ("a.wav", clip)}, {"model": "whisper-1", **data}))
        assert e["param"] == param, (data, e)
    with pytest.raises(openai.BadRequestError) as e:
        c.audio.transcriptions.create(model="whisper-1", file=("a.wav", clip), timestamp_granularities=["word"],
                                      response_format="verbose_json")
    assert "word" in e.value.body["message"]
    with pytest.raises(openai.NotFoundError):
        c.audio.transcriptions.create(model="no-such-model", file=("a.wav", clip))
    with pytest.raises(openai.BadRequestError) as e:  # the golden has no task tokens
        c.audio.translations.create(model="whisper-1", file=("a.wav", clip))
    assert "translate" in e.value.body["message"]
    assert s.alive()


def test_streamed_transcription(speech_server):
    """stream=true: a transcript.text.delta event per segment as its window is decoded, then
    transcript.text.done; a client that hangs up mid-stream leaves the server serving."""
    s = speech_server
    c = sdk(s)
    clip = wav_bytes(tone(65.0, seed=3))  # three windows
    events = list(c.audio.transcriptions.create(model="whisper-1", file=("long.wav", clip), stream=True))
    deltas = [e.delta for e in events if e.type == "transcript.text.delta"]
    assert [e.type for e in events][-1] == "transcript.text.done" and len(deltas) == 3, events
    assert "".join(deltas).strip() == events[-1].text
    plain = c.audio.transcriptions.create(model="whisper-1", file=("long.wav", clip))
    assert plain.text == events[-1].text
    with pytest.raises(openai.BadRequestError) as e:
        c.audio.translations.create(model="whisper-1", file=("long.wav", clip), extra_body={"stream": "true"})
    assert e.value.body["param"] == "stream"
    r = requests.post(s.url + "/v1/audio/transcriptions", files={"file": ("long.wav", clip)},
                      data={"model": "whisper-1", "stream": "true"}, stream=True, timeout=120)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    first = next(r.iter_lines(decode_unicode=True, delimiter="\n\n"))
    assert json.loads(first.removeprefix("data: "))["type"] == "transcript.text.delta"
    r.close()  # hang up mid-stream
    assert c.audio.transcriptions.create(model="whisper-1", file=("a.wav", wav_bytes(tone(1.0)))).text is not None
    assert s.alive()


def test_odd_but_valid_audio(speech_server):
    """Unusual sample formats, rates and layouts decode and transcribe; 0.1 s is the shortest accepted."""
    s = speech_server
    one = tone(0.6)
    f32 = (one / 32767.0).astype(np.float32)
    clips = {
        "0.1 s": wav_bytes(tone(0.1)),
        "8-bit unsigned": wav_bytes((one // 256 + 128).astype(np.uint8), width=1),
        "24-bit": wav_ext(1, 24, 1, RATE, b"".join((int(v) * 256).to_bytes(3, "little", signed=True) for v in one)),
        "float32": wav_ext(3, 32, 1, RATE, f32.tobytes()),
        "float64": wav_ext(3, 64, 1, RATE, f32.astype(np.float64).tobytes()),
        "6 channels at 8 kHz": wav_bytes(np.repeat(tone(0.6, 8000), 6), rate=8000, channels=6),
        "96 kHz stereo": wav_bytes(np.repeat(tone(0.6, 96000), 2), rate=96000, channels=2),
    }
    for name, data in clips.items():
        r = post(s, {"file": ("clip.wav", data)}, {"model": "whisper-1", "response_format": "verbose_json"})
        assert r.status_code == 200, (name, r.text)
        assert abs(r.json()["duration"] - (0.1 if name == "0.1 s" else 0.6)) < 0.01, (name, r.json()["duration"])


def test_queue_is_bounded(speech_server):
    """--audio-queue 1: one job runs, one waits, the rest get 429 at once; the server stays up."""
    s = speech_server
    long_clip = wav_bytes(tone(150.0, seed=3))
    results = [None] * 6

    def send(i):
        results[i] = post(s, {"file": ("long.wav", long_clip)}, {"model": "whisper-1"})
    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    codes = sorted(r.status_code for r in results)
    assert codes.count(429) >= 1 and codes.count(200) >= 1 and set(codes) <= {200, 429}, codes
    e = [r for r in results if r.status_code == 429][0]
    assert e.json()["error"]["type"] == "rate_limit_error" and e.headers.get("Retry-After") == "1"
    assert s.alive()


def test_audio_model_beside_chat(chat_audio_server, jfk):
    s = chat_audio_server
    c = sdk(s)
    listed = requests.get(s.url + "/v1/models", timeout=10).json()["data"]
    assert [m.get("audio", False) for m in listed] == [False, True]  # the page's Audio button keys on this
    chat_id, audio_id = [m["id"] for m in listed]
    assert c.chat.completions.create(model=chat_id, messages=[{"role": "user", "content": "hi"}],
                                     max_tokens=4).choices[0].message.content is not None
    assert requests.get(s.url + "/v1/models/" + audio_id, timeout=10).json()["id"] == audio_id
    with open(jfk, "rb") as f:
        v = c.audio.transcriptions.create(model=audio_id, file=f, response_format="verbose_json", language="en",
                                          prompt="President Kennedy", timestamp_granularities=["segment"])
    assert v.language == "en" and v.task == "transcribe" and abs(v.duration - 11.0) < 0.1
    assert v.segments, v
    for seg in v.segments:  # timestamp tokens make the segments: ordered and inside the audio
        assert 0 <= seg.start <= seg.end <= 30.0
    with open(jfk, "rb") as f:
        t = c.audio.translations.create(model=audio_id, file=f, response_format="verbose_json")
    assert t.task == "translate"
    with open(jfk, "rb") as f:
        assert isinstance(c.audio.transcriptions.create(model="whisper-1", file=f, language="fr").text, str)
    with pytest.raises(openai.BadRequestError) as e:
        with open(jfk, "rb") as f:
            c.audio.transcriptions.create(model=audio_id, file=f, language="xx")
    assert "language" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        with open(jfk, "rb") as f:
            c.audio.transcriptions.create(model=chat_id, file=f)
    assert e.value.body["code"] == "model_not_supported"


def test_chat_runs_while_audio_works(chat_audio_server):
    """A long transcription runs on its own worker: chat requests complete meanwhile."""
    s = chat_audio_server
    done = {}

    def transcribe():
        done["r"] = post(s, {"file": ("long.wav", wav_bytes(tone(240.0, seed=5)))}, {"model": "whisper-1"})
        done["t"] = time.time()
    th = threading.Thread(target=transcribe)
    th.start()
    time.sleep(1.0)
    c = sdk(s)
    for _ in range(3):
        c.chat.completions.create(model="default", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    chat_done = time.time()
    th.join(300)
    assert done["r"].status_code == 200, done["r"].text
    assert chat_done < done["t"], "chat waited for the transcription"


def test_web_page_transcribes_an_upload(chat_audio_server, jfk, browser):
    """The chat page shows its Audio button for an audio model and puts the transcript in the message box."""
    from selenium.webdriver.common.by import By
    browser.get(chat_audio_server.url + "/")
    button = browser.find_element(By.ID, "audio")
    assert wait_for(lambda: button.is_displayed(), 30), "no Audio button"
    browser.execute_script("document.getElementById('audiofile').hidden = false;")
    browser.find_element(By.ID, "audiofile").send_keys(str(jfk))
    box = browser.find_element(By.ID, "input")
    assert wait_for(lambda: box.get_attribute("value").strip() != "", 60), "no transcript in the message box"
