"""Long recordings are read from disk a window at a time: `ingot transcribe`
on an hour of audio stays far below the 230 MB that the hour's float PCM
alone would take (the whole-file path peaked at 301 MB on the golden model)."""
import pathlib
import subprocess
import sys
import wave

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "tools"))
from wer import edit_distance, librivox_refs, normalize  # noqa: E402

RATE = 16000
HOUR_S = 3600
GROUP_STARTS = (10.0, 1800.0, 3500.0)  # where the five LibriVox clips play, back to back
# Peak RSS the hour may add over a 11 s clip: the hour's float PCM is 230 MB.
MAX_EXTRA_MB = 64


@pytest.fixture(scope="module")
def hour(tmp_path_factory, shared_dir):
    """An hour of faint noise with the LibriVox clips at GROUP_STARTS; the group's length in seconds."""
    audio = shared_dir / "assets" / "audio"
    clips = []
    for name in sorted(librivox_refs(audio)):
        with wave.open(str(audio / f"{name}.wav")) as w:
            assert w.getframerate() == RATE and w.getnchannels() == 1
            clips.append(np.frombuffer(w.readframes(w.getnframes()), np.int16))
    group = np.concatenate(clips)
    pcm = np.random.default_rng(0).normal(0, 3, HOUR_S * RATE).astype(np.int16)
    for s in GROUP_STARTS:
        at = int(s * RATE)
        pcm[at:at + len(group)] = group
    path = tmp_path_factory.mktemp("long-audio") / "hour.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(pcm.tobytes())
    return path, len(group) / RATE


def run_measured(cmd, out_path, timeout=300):
    """Runs cmd with stdout to out_path; (exit code, peak RSS in MB, stderr) of cmd alone."""
    tool = pathlib.Path(__file__).resolve().parent / "tools" / "peak_rss.py"
    r = subprocess.run([sys.executable, str(tool), str(out_path)] + cmd, capture_output=True, text=True,
                       timeout=timeout)
    lines = r.stderr.strip().splitlines()
    return r.returncode, int(lines[-1]) / 1024, r.stderr


def test_hour_without_vad_in_bounded_memory(ingot_bin, shared_dir, hour, tmp_path):
    """120 windows of the random golden model: every window is decoded, none is held after it."""
    g = shared_dir / "goldens" / "whisper-float32"
    base = [ingot_bin, "transcribe", "--model", str(g), "--max-tokens", "1", "--format", "srt"]
    rc, short_mb, err = run_measured(base + [str(shared_dir / "assets" / "audio" / "jfk.wav")], tmp_path / "short.srt")
    assert rc == 0, err
    rc, long_mb, err = run_measured(base + [str(hour[0])], tmp_path / "hour.srt")
    assert rc == 0, err
    srt = (tmp_path / "hour.srt").read_text()
    assert srt.count(" --> ") == HOUR_S // 30, srt[-300:]
    assert "00:59:30,000 --> 01:00:00,000" in srt
    print(f"peak RSS: 11 s clip {short_mb:.0f} MB, one hour {long_mb:.0f} MB")
    assert long_mb < short_mb + MAX_EXTRA_MB, (short_mb, long_mb)


def test_hour_with_vad_transcribes_only_the_speech(ingot_bin, shared_dir, tiny_en, hour, tmp_path):
    """Real weights, VAD: the hour is read twice (frame energies, then the speech), the three groups are
    transcribed where they are in the recording and nothing else is."""
    import json
    path, group_s = hour
    base = [ingot_bin, "transcribe", "--model", str(tiny_en), "--language", "en", "--format", "verbose_json"]
    rc, short_mb, err = run_measured(base + [str(shared_dir / "assets" / "audio" / "jfk.wav")], tmp_path / "s.json")
    assert rc == 0, err
    rc, long_mb, err = run_measured(base + ["--vad", str(path)], tmp_path / "hour.json")
    assert rc == 0, err
    t = json.loads((tmp_path / "hour.json").read_text())
    assert t["duration"] == pytest.approx(HOUR_S)
    ref = normalize(" ".join(v for _, v in sorted(librivox_refs(shared_dir / "assets" / "audio").items())))
    # Every segment starts and ends inside one group (a group's last segment often closes a few timestamp
    # steps past the seam of the gathered speech: that end stays in its group, not minutes later).
    for s in t["segments"]:
        assert any(g - 1 <= s["start"] <= s["end"] <= g + group_s + 1 for g in GROUP_STARTS), s
    for g in GROUP_STARTS:
        words = normalize(" ".join(s["text"] for s in t["segments"] if g - 1 <= s["start"] <= g + group_s + 1))
        wer = edit_distance(ref, words) / len(ref)
        assert wer <= 0.15, (g, wer, " ".join(words))
    print(f"peak RSS: 11 s clip {short_mb:.0f} MB, one hour with VAD {long_mb:.0f} MB")
    assert long_mb < short_mb + MAX_EXTRA_MB, (short_mb, long_mb)


def test_duration_cap_is_a_clear_error(ingot_bin, shared_dir, hour):
    """--max-audio-seconds refuses from the header, before decoding; a bad value is refused too."""
    g = str(shared_dir / "goldens" / "whisper-float32")
    r = subprocess.run([ingot_bin, "transcribe", "--model", g, "--max-audio-seconds", "600", str(hour[0])],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "3600 s long; the limit is 600 s" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = subprocess.run([ingot_bin, "transcribe", "--model", g, "--max-audio-seconds", "0", str(hour[0])],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "--max-audio-seconds must be > 0" in r.stderr, r.stderr
