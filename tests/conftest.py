"""Shared pytest fixtures: where the ingot binary and the shared assets are."""
import os
import pathlib

import pytest

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
