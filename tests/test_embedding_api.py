"""The embedding API (include/ingot/model.h, libingot.so) through examples/generate.cpp, built by
scripts/test.sh against the installed package alone: its greedy text equals `ingot generate` on the
same GGUF file, plain and through the chat template, and bad input is a clear error."""
import os
import pathlib
import subprocess

from smollm2_prompts import smollm2_path


def example_bin(ingot_bin):
    # scripts/test.sh builds examples/ into build/examples beside build/src/cli/ingot.
    path = pathlib.Path(ingot_bin).resolve().parents[2] / "examples" / "ingot_generate"
    assert path.exists(), f"{path} is not built: scripts/test.sh installs the package and builds examples/"
    return str(path)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def test_example_streams_what_generate_prints(ingot_bin):
    exe, model = example_bin(ingot_bin), str(smollm2_path())
    for prompt, chat in (("The three primary colours are", []), ("Name a large city in France.", ["--chat"])):
        ours = run([exe, model, prompt, "--max-tokens", "24", *chat])
        assert ours.returncode == 0, ours.stderr
        assert "ingot 0.1.0: " in ours.stderr and "generated tokens" in ours.stderr
        ref = run([ingot_bin, "generate", "--model", model, "--prompt", prompt, "--max-tokens", "24", *chat])
        assert ref.returncode == 0, ref.stderr
        assert ours.stdout == ref.stdout
        assert ours.stdout.strip()
    ids = run([exe, model, "Hello", "--max-tokens", "5", "--ids"])
    assert ids.returncode == 0, ids.stderr
    assert len(ids.stdout.split()) == 5 and all(t.isdigit() for t in ids.stdout.split())


def test_example_reports_bad_input(ingot_bin, tmp_path):
    exe = example_bin(ingot_bin)
    r = run([exe])
    assert r.returncode == 2 and "usage:" in r.stderr
    r = run([exe, str(tmp_path / "missing-model")])
    assert r.returncode == 1 and r.stderr.startswith("error: ") and "missing-model" in r.stderr
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + os.urandom(64))
    r = run([exe, str(bad)])
    assert r.returncode == 1 and r.stderr.startswith("error: "), r.stderr


def test_installed_package_is_self_contained(ingot_bin):
    # The example's link line names only libingot.so: no static module, no internal header.
    exe = example_bin(ingot_bin)
    needed = run(["readelf", "-d", exe]).stdout
    assert "libingot.so.0" in needed
    root = pathlib.Path(ingot_bin).resolve().parents[2]
    headers = sorted(p.name for p in (root / "install" / "include" / "ingot").iterdir())
    assert headers == ["engine.h", "model.h", "types.h"]
    for h in headers:
        text = (root / "install" / "include" / "ingot" / h).read_text()
        for line in text.splitlines():
            if line.startswith("#include \""):
                assert line.startswith("#include \"ingot/"), f"{h} includes a non-public header: {line}"
