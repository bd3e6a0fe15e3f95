"""`ingot transcribe` through the CLI: the --dump contract of PARITY.md
against the whisper golden, output formats, and bad audio."""
import json
import subprocess



def read_st(path):
    import numpy as np
    from safetensors.numpy import load_file
    return load_file(str(path))


def rel(a, b):
    import numpy as np
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / (np.linalg.norm(b) + 1e-30))


def test_dump_matches_golden(ingot_bin, shared_dir, tmp_path):
    g = shared_dir / "goldens" / "whisper-float32"
    ids = json.loads((g / "golden.json").read_text())["decoder_ids"]
    out = tmp_path / "dump.safetensors"
    r = subprocess.run([ingot_bin, "transcribe", "--model", str(g), str(g / "audio.wav"), "--dump", str(out),
                        "--max-tokens", str(len(ids) - 1)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ours, ref = read_st(out), read_st(g / "logits.safetensors")
    assert rel(ours["mel"], ref["mel"]) <= 1e-5
    assert rel(ours["encoder_out"], ref["encoder_out"]) <= 1e-4
    assert ours["decoder_ids"].tolist() == ids
    assert rel(ours["step_logits"], ref["step_logits"]) <= 1e-5


def test_formats_and_bad_audio(ingot_bin, shared_dir, tmp_path):
    g = shared_dir / "goldens" / "whisper-float32"
    clip = shared_dir / "assets" / "audio" / "jfk.mp3"
    for fmt, check in [("srt", lambda s: "-->" in s), ("vtt", lambda s: s.startswith("WEBVTT")),
                       ("verbose_json", lambda s: "segments" in json.loads(s)), ("text", lambda s: s.strip() != "")]:
        r = subprocess.run([ingot_bin, "transcribe", "--model", str(g), str(clip), "--format", fmt, "--max-tokens", "4"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and check(r.stdout), (fmt, r.stderr)
    bad = tmp_path / "notes.mp3"
    bad.write_text("definitely not an mp3 file, just words")
    for path in [bad, tmp_path / "missing.wav"]:
        r = subprocess.run([ingot_bin, "transcribe", "--model", str(g), str(path)], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = subprocess.run([ingot_bin, "transcribe", "--model", str(shared_dir / "goldens" / "llama-float32"), str(clip)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "whisper" in r.stderr


def test_decoding_flags(ingot_bin, shared_dir, tmp_path):
    """Beam search, VAD and the int8 decoder run on the random golden; bad values are one-line errors."""
    g = shared_dir / "goldens" / "whisper-float32"
    clip = shared_dir / "assets" / "audio" / "jfk.wav"
    base = [ingot_bin, "transcribe", "--model", str(g), str(clip), "--max-tokens", "4"]
    for extra in (["--beam-size", "3", "--patience", "2", "--length-penalty", "0.5"], ["--vad", "--format", "srt"],
                  ["--weights", "int8", "--best-of", "2", "--temperature", "0.5"], ["--no-condition-on-previous-text"]):
        r = subprocess.run(base + extra, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (extra, r.stderr)
    for extra, word in ((["--beam-size", "0"], "beam_size"), (["--weights", "int4"], "int8"),
                        (["--word-timestamps"], "alignment heads"), (["--dump", str(tmp_path / "d"), "--beam-size", "2"],
                                                                     "greedy"),
                        (["--patience", "0"], "patience"), (["--no-speech-threshold", "3"], "no_speech_threshold")):
        r = subprocess.run(base + extra, capture_output=True, text=True, timeout=120)
        assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and word in r.stderr, (extra, r.stderr)
