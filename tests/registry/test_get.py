"""`ingot get` against a fake hub: layout, resume, verification, filters,
tokens, and every bad-input path leaving no complete-looking file behind."""
import hashlib
import os
import resource
import subprocess
import sys

from fake_hub import sha256, git_sha1


def repo_root(cache, repo_id):
    return cache / ("models--" + repo_id.replace("/", "--"))


def etag_of(name, data):
    return sha256(data) if name.endswith((".safetensors", ".gguf", ".bin")) else git_sha1(data)


def assert_no_false_blobs(cache, repo_id):
    """Every finished blob's content matches its name; only .incomplete files may be partial."""
    blobs = repo_root(cache, repo_id) / "blobs"
    for b in blobs.iterdir() if blobs.exists() else []:
        if b.name.endswith(".incomplete"):
            continue
        data = b.read_bytes()
        assert b.name in (sha256(data), git_sha1(data)), f"blob {b.name} does not hold its content"


def test_get_writes_the_layout_huggingface_hub_reads(ingot, hub):
    ingot.env_extra["HF_TOKEN"] = "hf_secret123"
    p = ingot.run("get", "org/tiny")
    repo = hub.repos["org/tiny"]
    root = repo_root(ingot.cache, "org/tiny")
    snap = root / "snapshots" / repo.commit
    assert p.stdout.strip() == str(snap)
    # Not a terminal: plain lines, one per file, and a final total.
    assert "\r" not in p.stderr and "fetched model.safetensors" in p.stderr and "(100%)" in p.stderr, p.stderr
    assert (root / "refs" / "main").read_text() == repo.commit
    for name, data in repo.files.items():
        link = snap / name
        assert link.is_symlink() and not os.path.isabs(os.readlink(link)), name
        assert link.read_bytes() == data
        assert (root / "blobs" / etag_of(name, data)).exists()
    # The LFS file came through the CDN redirect; the token went with every hub request.
    assert hub.requests("GET", "/cdn/"), hub.log
    assert all(h.get("authorization") == "Bearer hf_secret123" for m, path, h in hub.log if not path.startswith("/cdn/"))
    # huggingface_hub itself, offline, finds the same files.
    script = f"""
import os, sys
from huggingface_hub import snapshot_download, hf_hub_download, scan_cache_dir
snap = snapshot_download("org/tiny")
assert snap == {str(snap)!r}, snap
f = hf_hub_download("org/tiny", "sub/notes.txt")
assert open(f, "rb").read() == b"nested file\\n"
info = scan_cache_dir()
repos = {{r.repo_id: r for r in info.repos}}
r = repos["org/tiny"]
rev = next(iter(r.revisions))
assert rev.commit_hash == {repo.commit!r}
assert set(rev.refs) == {{"main"}}, rev.refs
assert sorted(f.file_name for f in rev.files) == sorted(os.path.basename(n) for n in {sorted(repo.files)!r})
assert r.size_on_disk == {sum(len(d) for d in repo.files.values())}, r.size_on_disk
assert not info.warnings, info.warnings
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(ingot.cache))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_dropped_connection_resumes_with_range(ingot, hub):
    weights = hub.repos["org/tiny"].files["model.safetensors"]
    hub.drops["model.safetensors"] = [len(weights) // 3, 1]
    p = ingot.run("get", "org/tiny", "--jobs", "2")
    ranges = [h.get("range") for m, path, h in hub.requests("GET", "/cdn/") if h.get("range")]
    assert ranges == [f"bytes={len(weights) // 3}-"], (ranges, p.stderr)
    assert "resuming at byte" in p.stderr
    snap = repo_root(ingot.cache, "org/tiny") / "snapshots" / hub.repos["org/tiny"].commit
    assert (snap / "model.safetensors").read_bytes() == weights


def test_network_failure_keeps_partial_file_but_no_model(ingot, hub):
    repo = hub.repos["org/tiny"]
    weights = repo.files["model.safetensors"]
    hub.drops["model.safetensors"] = [len(weights) // 4, 100]
    p = ingot.run("get", "org/tiny", ok=False)
    assert "interrupted" in p.stderr and "run the same command again to resume" in p.stderr, p.stderr
    root = repo_root(ingot.cache, "org/tiny")
    part = root / "blobs" / (sha256(weights) + ".incomplete")
    assert part.exists() and 0 < part.stat().st_size < len(weights)
    assert not (root / "blobs" / sha256(weights)).exists()
    assert not (root / "refs" / "main").exists()
    assert not (root / "snapshots" / repo.commit / "model.safetensors").exists()
    assert_no_false_blobs(ingot.cache, "org/tiny")
    # Not offered as a model either.
    q = ingot.run("fit", "org/tiny", "--ctx", "16", ok=False)
    assert "ingot get org/tiny" in q.stderr
    # The network comes back: the next run continues from the partial file.
    have = part.stat().st_size
    hub.drops.clear()
    n_before = len(hub.requests("GET", "/cdn/"))
    ingot.run("get", "org/tiny")
    later = hub.requests("GET", "/cdn/")[n_before:]
    assert [h.get("range") for _, _, h in later] == [f"bytes={have}-"]
    assert (root / "snapshots" / repo.commit / "model.safetensors").read_bytes() == weights


def test_corrupted_bytes_are_detected_and_fetched_again(ingot, hub):
    hub.corrupt["model.safetensors"] = 1
    hub.corrupt["config.json"] = 1
    p = ingot.run("get", "org/tiny")
    assert p.stderr.count("checksum mismatch") == 2, p.stderr
    repo = hub.repos["org/tiny"]
    snap = repo_root(ingot.cache, "org/tiny") / "snapshots" / repo.commit
    for name in ("model.safetensors", "config.json"):
        assert (snap / name).read_bytes() == repo.files[name]
    assert len(hub.requests("GET", "/cdn/")) == 2
    assert_no_false_blobs(ingot.cache, "org/tiny")


def test_always_corrupt_fails_cleanly(ingot, hub):
    hub.corrupt["model.safetensors"] = 100
    p = ingot.run("get", "org/tiny", ok=False)
    assert "does not match its etag" in p.stderr
    assert not (repo_root(ingot.cache, "org/tiny") / "refs" / "main").exists()
    assert_no_false_blobs(ingot.cache, "org/tiny")


def test_include_and_exclude(ingot, hub):
    repo = hub.repos["org/tiny"]
    snap = repo_root(ingot.cache, "org/tiny") / "snapshots" / repo.commit
    ingot.run("get", "org/tiny", "--include", "*.json")
    assert sorted(str(p.relative_to(snap)) for p in snap.rglob("*") if p.is_symlink()) == [
        "config.json", "generation_config.json"]
    ingot.run("get", "org/tiny", "--exclude", "*.md", "--exclude", "sub/")
    assert sorted(str(p.relative_to(snap)) for p in snap.rglob("*") if p.is_symlink()) == [
        "config.json", "generation_config.json", "model.safetensors"]
    # The second run fetched only the weights; the json blobs were already there.
    assert len(hub.requests("GET", "/resolve/")) == 3
    assert len(hub.requests("GET", "/config.json")) == 1


def test_gguf_repo_needs_a_file_choice(ingot, hub):
    p = ingot.run("get", "org/quants-GGUF", ok=False)
    assert "choose one with --file: m-Q4_0.gguf, m-Q8_0.gguf" in p.stderr
    assert not repo_root(ingot.cache, "org/quants-GGUF").exists()
    p = ingot.run("get", "org/quants-GGUF", "--file", "m-Q8_0.gguf")
    assert p.stdout.strip().endswith("/m-Q8_0.gguf")
    snap = repo_root(ingot.cache, "org/quants-GGUF") / "snapshots" / hub.repos["org/quants-GGUF"].commit
    assert [x.name for x in snap.iterdir()] == ["m-Q8_0.gguf"]
    p = ingot.run("get", "org/quants-GGUF", "--file", "m-Q2_K.gguf", ok=False)
    assert "has no file 'm-Q2_K.gguf'" in p.stderr


def test_unknown_repo_and_bad_revision(ingot, hub):
    p = ingot.run("get", "org/nope", ok=False)
    assert "repository org/nope not found" in p.stderr
    p = ingot.run("get", "org/tiny@no-such-branch", ok=False)
    assert "revision 'no-such-branch' not found in org/tiny" in p.stderr
    p = ingot.run("get", "org/tiny@bad rev", ok=False)
    assert "bad revision" in p.stderr
    p = ingot.run("get", "not-a-repo", ok=False)
    assert "expected ORG/NAME" in p.stderr
    assert not ingot.cache.exists() or not any(ingot.cache.iterdir())


def test_revision_by_tag_and_commit(ingot, hub):
    repo = hub.repos["org/tiny"]
    old = repo.commit
    new_files = dict(repo.files, **{"README.md": b"# v2\n"})
    new = repo.push(new_files)
    repo.refs["v1"] = old
    ingot.run("get", "org/tiny@v1")
    root = repo_root(ingot.cache, "org/tiny")
    assert (root / "refs" / "v1").read_text() == old
    ingot.run("get", f"org/tiny@{new}")
    assert (root / "snapshots" / new / "README.md").read_bytes() == b"# v2\n"
    assert not (root / "refs" / new).exists()  # a commit id is not a ref (as in huggingface_hub)


def test_repo_without_supported_weights(ingot, hub):
    p = ingot.run("get", "org/pickles", ok=False)
    assert "no weights ingot can load" in p.stderr and "pytorch_model.bin" in p.stderr
    assert not repo_root(ingot.cache, "org/pickles").exists()


def test_hub_unreachable(ingot, hub):
    hub.close()
    p = ingot.run("get", "org/tiny", ok=False)
    assert "cannot reach" in p.stderr


def test_disk_full_leaves_no_complete_looking_file(ingot, hub):
    weights = hub.repos["org/tiny"].files["model.safetensors"]
    limit = len(weights) // 2

    def small_disk():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    p = ingot.run("get", "org/tiny", ok=False, preexec_fn=small_disk)
    assert "the disk is full or over its limit" in p.stderr, p.stderr
    root = repo_root(ingot.cache, "org/tiny")
    assert not (root / "blobs" / sha256(weights)).exists()
    assert not (root / "refs" / "main").exists()
    assert_no_false_blobs(ingot.cache, "org/tiny")
    # With room again, the same command finishes.
    ingot.run("get", "org/tiny")
    snap = root / "snapshots" / hub.repos["org/tiny"].commit
    assert hashlib.sha256((snap / "model.safetensors").read_bytes()).hexdigest() == sha256(weights)


def test_two_concurrent_gets_share_the_cache(ingot, hub):
    procs = [subprocess.Popen([ingot.binary, "get", "org/tiny"], env=ingot.env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert outs[0][0] == outs[1][0]
    # huggingface_hub's lock files, one per blob.
    locks = ingot.cache / ".locks" / "models--org--tiny"
    assert len(list(locks.glob("*.lock"))) == len(hub.repos["org/tiny"].files)
    assert_no_false_blobs(ingot.cache, "org/tiny")


def test_progress_bar_on_a_terminal(ingot, hub):
    import pty
    import select
    master, slave = pty.openpty()
    proc = subprocess.Popen([ingot.binary, "get", "org/tiny"], env=ingot.env(), stdout=subprocess.PIPE,
                            stderr=slave, text=False)
    os.close(slave)
    out = b""
    while True:
        r, _, _ = select.select([master], [], [], 30)
        if not r:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=30)
    os.close(master)
    assert proc.returncode == 0, out
    text = out.decode()
    bar = [seg for seg in text.split("\r") if seg.startswith("\x1b[K[")]
    assert bar and "] " in bar[-1] and "/s" in bar[-1] and "ETA" in bar[-1], text
    assert "(100%)" in bar[-1] and "#" * 24 in bar[-1], text


def test_renamed_repo_follows_the_hub_redirect(ingot, hub):
    hub.renamed["old-org/tiny"] = "org/tiny"
    repo = hub.repos["org/tiny"]
    p = ingot.run("get", "old-org/tiny")
    snap = repo_root(ingot.cache, "old-org/tiny") / "snapshots" / repo.commit
    assert p.stdout.strip() == str(snap)
    assert (snap / "model.safetensors").read_bytes() == repo.files["model.safetensors"]
    assert hub.requests("HEAD", "/old-org/tiny/resolve/") and hub.requests("HEAD", "/org/tiny/resolve/")
