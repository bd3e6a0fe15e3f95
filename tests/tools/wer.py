"""Word error rate for the speech tests: the LibriVox clips' transcription,
normalization and edit distance."""
import re

JFK = "and so my fellow americans ask not what your country can do for you ask what you can do for your country"


def normalize(text):
    """Lower case, hyphens as spaces, no punctuation; 'mister' and 'mr' are one word."""
    text = text.lower().replace("-", " ")
    text = re.sub(r"[^a-z0-9' ]+", " ", text)
    return ["mr" if w == "mister" else w for w in text.split()]


def edit_distance(ref, hyp):
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1]


def librivox_refs(audio_dir):
    """clip name -> reference text, from shared/assets/audio/transcription."""
    refs = {}
    for line in (audio_dir / "transcription").read_text().splitlines():
        m = re.match(r"<s>(.*)</s> \((.*)\)", line.strip())
        if m:
            refs[m.group(2)] = m.group(1)
    return refs
