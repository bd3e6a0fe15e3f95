"""`ingot bench model`: pp / tg rows through the engine on conftest's tiny
random llama, the JSON fields, LoRA adapters taken by the batch's sequences,
and clear errors for bad flags."""
import json
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
import lora_adapters as la  # noqa: E402


def bench_model(ingot_bin, *args, timeout=120):
    return subprocess.run([ingot_bin, "bench", "model", *args], capture_output=True, text=True, timeout=timeout)


def test_pp_and_tg_rows(ingot_bin, tiny_model, tmp_path):
    out = tmp_path / "model.json"
    r = bench_model(ingot_bin, str(tiny_model), "-p", "64", "-n", "16", "--depth", "0,48", "--batch", "1,3", "-r", "2",
                    "--ctx", "512", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].startswith("| test ") and "tok/s" in lines[1]
    rows = [line for line in lines if line.startswith("| pp64") or line.startswith("| tg16")]
    assert len(rows) == 8, r.stdout  # 2 depths x 2 batches x (pp, tg)
    j = json.loads(out.read_text())
    assert j["kv"] == "paged" and j["repetitions"] == 2 and j["context"] == 512
    got = {(x["test"], x["depth"], x["batch"]) for x in j["results"]}
    assert got == {(t, d, b) for t in ("pp64", "tg16") for d in (0, 48) for b in (1, 3)}
    for x in j["results"]:
        assert x["kind"] == x["test"][:2] and len(x["runs"]) == 2
        assert x["tokens_per_s"] > 0 and x["seconds"] > 0
        # The depth came from the prefix cache (48 is a whole number of cache blocks).
        assert x["cached_depth"] == x["depth"], x
        for run in x["runs"]:
            assert run["tokens_per_s"] > 0
            if x["kind"] == "pp":
                assert run["tokens"] == 64 * x["batch"]  # only the new tokens were computed
            else:
                # The decode window: the next 16 tokens of every sequence.
                assert run["tokens"] == 16 * x["batch"], run


def test_lora_adapters(ingot_bin, tiny_model, tmp_path):
    layers, mods = la.config_shapes(tiny_model)
    adapters = [la.write_peft(tmp_path / f"a{i}", la.pairs_for_shapes(layers, mods, 4, seed=i, std=0.1), rank=4,
                              alpha=8) for i in range(2)]
    out = tmp_path / "lora.json"
    r = bench_model(ingot_bin, str(tiny_model), "-p", "16", "-n", "8", "--depth", "0,16", "--batch", "3", "-r", "1",
                    "--ctx", "256", "--lora", str(adapters[0]), "--lora", str(adapters[1]), "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 LoRA adapter(s)" in r.stdout.splitlines()[0]
    j = json.loads(out.read_text())
    assert j["loras"] == [str(a) for a in adapters]
    for x in j["results"]:
        assert x["tokens_per_s"] > 0
        # Each sequence's depth prefix was cached under its own adapter and found again.
        assert x["cached_depth"] == x["depth"], x
    # A folder that holds no adapter, and a rank above the limit: one clear line each.
    for args, message in [(["--lora", str(tmp_path)], "LoRA adapter"),
                          (["--lora", str(adapters[0]), "--max-lora-rank", "2"], "--max-lora-rank")]:
        r = bench_model(ingot_bin, str(tiny_model), "-p", "0", "-n", "4", *args)
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert r.returncode == 1 and len(lines) == 1 and message in lines[0], (args, r.stderr)


def test_bad_flags(ingot_bin, tiny_model):
    m = str(tiny_model)
    for args, message in [([], "give the model once"), ([m, "--model", m], "give the model once"),
                          ([m, "--batch", "0"], "--batch"), ([m, "-r", "0"], "--repetitions"),
                          ([m, "-p", "0", "-n", "0"], "nothing to measure"),
                          ([m, "--depth", "x"], "--depth"),
                          ([m, "-p", "600", "-n", "0", "--ctx", "512"], "needs 601 tokens of context")]:
        r = bench_model(ingot_bin, *args)
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert r.returncode == 1 and len(lines) == 1 and message in lines[0], (args, r.stderr)
