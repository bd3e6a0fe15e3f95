"""Fixtures for the registry tests: a fake hub with small random-weight
checkpoints, and a runner for `ingot` with its own hub cache."""
import os
import subprocess

import pytest

from fake_hub import FakeHub, Repo
from registry_models import tiny_llama_files


@pytest.fixture
def hub():
    h = FakeHub()
    files, _ = tiny_llama_files(0)
    h.repos["org/tiny"] = Repo(files)
    h.repos["org/tiny-alpha"] = Repo(tiny_llama_files(1)[0])
    h.repos["org/tiny-beta"] = Repo(tiny_llama_files(2)[0])
    h.repos["org/pickles"] = Repo({"config.json": b"{}", "pytorch_model.bin": b"\x80\x02pickle"})
    h.repos["org/quants-GGUF"] = Repo({"README.md": b"q\n", "m-Q4_0.gguf": b"GGUF" + b"\x01" * 3000,
                                       "m-Q8_0.gguf": b"GGUF" + b"\x02" * 5000})
    yield h
    h.close()


class Ingot:
    """Runs `ingot` against one hub cache (and the fake hub as HF_ENDPOINT)."""

    def __init__(self, binary, cache, endpoint):
        self.binary, self.cache, self.endpoint = binary, cache, endpoint
        self.env_extra = {}

    def env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "INGOT_MODELS_DIR"))}
        env.update({"HF_HUB_CACHE": str(self.cache), "HF_ENDPOINT": self.endpoint, "HOME": str(self.cache.parent)})
        env.update(self.env_extra)
        return env

    def run(self, *args, ok=True, timeout=60, **kw):
        p = subprocess.run([self.binary, *args], capture_output=True, text=True, env=self.env(), timeout=timeout, **kw)
        if ok:
            assert p.returncode == 0, f"ingot {' '.join(args)} failed:\n{p.stdout}\n{p.stderr}"
        else:
            assert p.returncode != 0, f"ingot {' '.join(args)} should fail:\n{p.stdout}\n{p.stderr}"
            lines = [ln for ln in p.stderr.splitlines() if ln.startswith("ingot: error:")]
            assert len(lines) == 1, p.stderr
        return p


@pytest.fixture
def ingot(ingot_bin, hub, tmp_path):
    return Ingot(ingot_bin, tmp_path / "hub-cache", hub.url)
