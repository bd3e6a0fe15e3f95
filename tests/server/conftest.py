"""Fixtures for the server end-to-end tests: a small random-weight llama
checkpoint with the real Qwen3 tokenizer and chat template, and running
`ingot serve` processes."""
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests
from safetensors.numpy import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
from tiny_llama import tiny_llama  # noqa: E402

TOKENIZER = "qwen3"


def build_tiny_llama(dst: pathlib.Path, tokenizer_dir: pathlib.Path, seed: int = 0) -> pathlib.Path:
    """hidden 64, 2 layers, vocab covering the tokenizer; float32 weights."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, dst / name)
    tok = json.loads((tokenizer_dir / "tokenizer.json").read_text())
    n_ids = max([len(tok["model"]["vocab"])] + [t["id"] + 1 for t in tok.get("added_tokens", [])])
    vocab = ((n_ids + 127) // 128) * 128
    cfg_json = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())
    config, t = tiny_llama(vocab, tok_id(tok, cfg_json.get("eos_token")), seed)
    (dst / "config.json").write_text(json.dumps(config))
    save_file(t, str(dst / "model.safetensors"))
    return dst


def tok_id(tok, text):
    if text is None:
        return None
    for t in tok.get("added_tokens", []):
        if t["content"] == text:
            return t["id"]
    return tok["model"]["vocab"].get(text)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, ingot_bin, model_dir, *extra, ctx=512, preexec_fn=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = [ingot_bin, "serve", "--model", str(model_dir), "--port", str(self.port), "--ctx", str(ctx),
                     "--max-tokens", "16", *extra]
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=preexec_fn)
        self.output = []
        ready = threading.Event()

        def pump():
            for line in self.proc.stdout:
                self.output.append(line)
                if "serving" in line and "http://" in line:
                    ready.set()
        threading.Thread(target=pump, daemon=True).start()
        deadline = time.time() + 60
        while not ready.is_set() and time.time() < deadline and self.proc.poll() is None:
            ready.wait(0.05)
        assert ready.is_set(), f"ingot serve did not start: {''.join(self.output)}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def metrics(self) -> dict:
        text = requests.get(self.url + "/metrics", timeout=10).text
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, shared_dir):
    tdir = shared_dir / "assets" / "tokenizers" / TOKENIZER
    assert (tdir / "tokenizer.json").exists(), f"missing tokenizer {tdir}"
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"), tdir)


@pytest.fixture(scope="module")
def server(ingot_bin, tiny_model):
    s = Server(ingot_bin, tiny_model)
    yield s
    s.stop()
    assert s.proc.returncode in (0, -15), "".join(s.output)
