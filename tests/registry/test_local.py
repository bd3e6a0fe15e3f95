"""ingot ls / rm / gc over a cache filled by `ingot get`, and --model given
as a repo id or part of a name through `ingot generate` and `ingot fit`."""
import shutil

from registry_models import tiny_llama_files


def repo_root(cache, repo_id):
    return cache / ("models--" + repo_id.replace("/", "--"))


def table(stdout):
    lines = stdout.strip().splitlines()
    head = lines[0].split()
    return head, {ln.split()[0]: ln.split() for ln in lines[1:]}


def test_ls_shows_cache_and_models_dir(ingot, hub, tmp_path):
    ingot.run("get", "org/tiny")
    ingot.run("get", "org/quants-GGUF", "--file", "m-Q4_0.gguf")
    models_dir = tmp_path / "models"
    snap = repo_root(ingot.cache, "org/tiny") / "snapshots" / hub.repos["org/tiny"].commit
    shutil.copytree(snap, models_dir / "my-copy")
    p = ingot.run("ls", "--models-dir", str(models_dir), "--ctx", "512")
    head, rows = table(p.stdout)
    assert head == ["NAME", "SIZE", "ARCH", "PARAMS", "QUANT", "CTX", "FITS"]
    _, n_params = tiny_llama_files(0)
    size_kb = sum(len(d) for d in hub.repos["org/tiny"].files.values()) / 1000
    for name in ("org/tiny", "my-copy"):
        r = rows[name]
        assert r[1:3] == [f"{size_kb:.1f}", "KB"], r
        assert r[3:7] == ["LlamaForCausalLM", f"{n_params / 1000:.1f}K", "float32", "2048"], r
        assert r[7] == "yes", r
    # A file that is not really GGUF is listed with its reason, not fatal.
    assert rows["org/quants-GGUF/m-Q4_0.gguf"][3] == "?"


def test_rm_and_gc_report_what_they_free(ingot, hub):
    ingot.run("get", "org/tiny")
    repo = hub.repos["org/tiny"]
    old, old_files = repo.commit, dict(repo.files)
    files, _ = tiny_llama_files(7)
    new = repo.push(files)
    ingot.run("get", "org/tiny")
    root = repo_root(ingot.cache, "org/tiny")
    # A stale partial download and a fresh one.
    (root / "blobs" / ("f" * 64 + ".incomplete")).write_bytes(b"x" * 1000)
    p = ingot.run("gc", "--incomplete-age", "0")
    # Old snapshot: its blobs that the new commit does not share (README.md and sub/notes.txt are shared).
    shared = {k for k in old_files if files.get(k) == old_files[k]}
    freed = sum(len(v) for k, v in old_files.items() if k not in shared) + 1000
    assert f"({freed} bytes)" in p.stdout and "1 snapshot" in p.stdout and "1 partial download" in p.stdout, p.stdout
    assert not (root / "snapshots" / old).exists() and (root / "snapshots" / new).exists()
    assert "freed 0 B (0 bytes)" in ingot.run("gc").stdout
    p = ingot.run("rm", "org/tiny")
    assert f"({sum(len(v) for v in files.values()) + 40} bytes)" in p.stdout, p.stdout
    assert not root.exists() and not (ingot.cache / ".locks" / root.name).exists()
    assert "not in the hub cache" in ingot.run("rm", "org/tiny", ok=False).stderr


def test_model_by_repo_id_and_name_part(ingot, hub):
    ingot.run("get", "org/tiny-alpha")
    ingot.run("get", "org/tiny-beta")
    snap = repo_root(ingot.cache, "org/tiny-beta") / "snapshots" / hub.repos["org/tiny-beta"].commit
    gen = ["--prompt-ids", "1,2,3", "--max-tokens", "4"]
    by_path = ingot.run("generate", "--model", str(snap), *gen).stdout
    assert ingot.run("generate", "--model", "org/tiny-beta", *gen).stdout == by_path
    assert ingot.run("generate", "--model", "BETA", *gen).stdout == by_path
    p = ingot.run("generate", "--model", "tiny", *gen, ok=False)
    assert "'tiny' matches 2 local models: org/tiny-alpha, org/tiny-beta" in p.stderr
    p = ingot.run("fit", "alpha", "--ctx", "64")
    assert "snapshots/" + hub.repos["org/tiny-alpha"].commit in p.stdout and "fits: yes" in p.stdout
    p = ingot.run("fit", "tiny", "--ctx", "64", ok=False)
    assert "matches 2 local models" in p.stderr
    p = ingot.run("fit", "org/absent", "--ctx", "64", ok=False)
    assert "ingot get org/absent" in p.stderr
    p = ingot.run("generate", "--model", "zzz", *gen, ok=False)
    assert "no local model name contains it" in p.stderr
    p = ingot.run("generate", "--model", "/no/such/dir", *gen, ok=False)
    assert "model directory not found: /no/such/dir" in p.stderr
