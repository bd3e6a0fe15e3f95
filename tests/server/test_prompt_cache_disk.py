"""The prompt cache's disk tier through `ingot serve`: a long prompt answered
before a restart is restored from disk after it (same greedy tokens as a cold
run, cached_tokens reported), corrupt / truncated / foreign snapshot files are
refused and deleted, the disk bound holds under many distinct prompts, and
`ingot cache ls | rm | gc` see and manage the files."""
import math
import shutil
import subprocess
import time

import openai
import pytest

from conftest import Server
from test_smollm2_serve import smollm2

BLOCK = 16
CTX = 8192


def long_system(n_facts: int) -> str:
    """About 8 k tokens of system prompt for SmolLM2 at n_facts=421 (2.8 k at 150)."""
    colors = ["red", "green", "blue", "amber", "violet", "silver", "ochre", "teal"]
    return "You are a careful assistant. Remember these facts.\n" + "\n".join(
        f"Fact {i}: the {colors[i % 8]} box number {i * 7 % 101} holds {i % 13} stones." for i in range(n_facts))


SYSTEM = long_system(421)


def chat(server, question, system=SYSTEM, max_tokens=8):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=300)
    return client.chat.completions.create(
        model="m", temperature=0, max_tokens=max_tokens, logprobs=True,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}])


def answer(r):
    return [(t.token, t.logprob) for t in r.choices[0].logprobs.content]


def wait_for(cond, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def smol(ingot_bin, *extra):
    return Server(ingot_bin, smollm2(), "--served-model-name", "m", *extra, ctx=CTX)


def snapshots(cache):
    return sorted(cache.glob("*/*.ikv"))


@pytest.fixture(scope="module")
def cold_reference(ingot_bin):
    """The answer to SYSTEM + a new question with no prefix cache at all."""
    s = smol(ingot_bin, "--no-disk-cache", "--prompt-cache-size", "0")
    try:
        r = chat(s, "Which box holds the most stones?")
        assert r.usage.prompt_tokens >= 8000, r.usage
        assert r.usage.prompt_tokens_details.cached_tokens == 0
        return r
    finally:
        s.stop()


@pytest.fixture(scope="module")
def warmed_cache(ingot_bin, tmp_path_factory):
    """A cache folder holding the snapshot of SYSTEM + another question, written by a stopped server."""
    cache = tmp_path_factory.mktemp("prompt-cache")
    s = smol(ingot_bin, "--cache-dir", str(cache))
    try:
        chat(s, "Say hi.")
        wait_for(lambda: s.metrics()["ingot_prompt_cache_disk_writes_total"] >= 1, "the snapshot write")
        m = s.metrics()
        assert m["ingot_prompt_cache_disk_enabled"] == 1 and m["ingot_prompt_cache_disk_files"] == 1
    finally:
        s.stop()
    assert s.proc.returncode in (0, -15), "".join(s.output)
    assert len(snapshots(cache)) == 1
    return cache


def copy_cache(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_restart_restores_the_prompt_from_disk_with_identical_tokens(ingot_bin, warmed_cache, cold_reference, tmp_path):
    cache = copy_cache(warmed_cache, tmp_path / "c")
    s = smol(ingot_bin, "--cache-dir", str(cache))
    try:
        r = chat(s, "Which box holds the most stones?")
        m = s.metrics()
    finally:
        s.stop()
    prompt = r.usage.prompt_tokens
    cached = r.usage.prompt_tokens_details.cached_tokens
    # Everything up to the question (SYSTEM and the template around it) came from disk.
    assert cached % BLOCK == 0 and cached >= 8000 and prompt - cached < 48, r.usage
    assert m['ingot_prefix_cache_hits_total{tier="disk"}'] == 1
    assert m['ingot_prefix_cache_reused_tokens_total{tier="disk"}'] == cached
    assert m["ingot_prompt_cache_disk_refused_total"] == 0
    # Greedy: the same tokens as the cold run, and logprobs within float noise.
    got, want = answer(r), answer(cold_reference)
    assert [t for t, _ in got] == [t for t, _ in want]
    assert all(math.isclose(a, b, abs_tol=2e-3) for (_, a), (_, b) in zip(got, want)), (got, want)
    # A second request is a RAM hit now.
    s2 = smol(ingot_bin, "--cache-dir", str(cache))
    try:
        chat(s2, "Which box holds the most stones?")
        chat(s2, "Which box holds the fewest stones?")
        m2 = s2.metrics()
    finally:
        s2.stop()
    assert m2['ingot_prefix_cache_hits_total{tier="disk"}'] == 1
    assert m2['ingot_prefix_cache_hits_total{tier="ram"}'] == 1


@pytest.fixture(scope="module")
def tiny_warmed(ingot_bin, tiny_model, tmp_path_factory):
    """The tiny model's cache folder holding one snapshot, and the cold answer to a new question."""
    cache = tmp_path_factory.mktemp("tiny-cache")
    s = Server(ingot_bin, tiny_model, "--cache-dir", str(cache))
    try:
        chat(s, "Say hi.", system=long_system(8))
        wait_for(lambda: s.metrics()["ingot_prompt_cache_disk_writes_total"] >= 1, "the snapshot write")
    finally:
        s.stop()
    cold = Server(ingot_bin, tiny_model, "--no-disk-cache", "--prompt-cache-size", "0")
    try:
        reference = chat(cold, "Which box holds the most stones?", system=long_system(8))
    finally:
        cold.stop()
    assert len(snapshots(cache)) == 1
    return cache, reference


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "foreign"])
def test_damaged_or_foreign_snapshots_are_refused_and_deleted(ingot_bin, tiny_model, tiny_warmed, tmp_path, damage):
    warmed, reference = tiny_warmed
    cache = copy_cache(warmed, tmp_path / "c")
    (snap,) = snapshots(cache)
    kv = ["--kv", "kv8"] if damage == "foreign" else []
    if damage == "corrupt":
        data = bytearray(snap.read_bytes())
        data[len(data) - 100] ^= 0x5A  # in the payload: found by the restore's checksum
        snap.write_bytes(bytes(data))
    elif damage == "truncated":
        snap.write_bytes(snap.read_bytes()[:-3000])
    else:
        # Another KV scheme's folder (kv8) gets this model's float snapshot.
        Server(ingot_bin, tiny_model, "--cache-dir", str(cache), *kv).stop()
        (other,) = [d for d in cache.iterdir() if d != snap.parent]
        shutil.move(str(snap), other / snap.name)
        snap = other / snap.name
    bad = snap.read_bytes()
    s = Server(ingot_bin, tiny_model, "--cache-dir", str(cache), *kv)
    try:
        r = chat(s, "Which box holds the most stones?", system=long_system(8))
        wait_for(lambda: s.metrics()["ingot_prompt_cache_disk_writes_total"] >= 1, "the new snapshot")
        m = s.metrics()
    finally:
        s.stop()
    # The refused file was deleted; this request's own prefix (the same tokens: the
    # question starts in the last, partial block) was written again, whole.
    assert not snap.exists() or snap.read_bytes() != bad
    assert f"refused snapshot {snap}" in "".join(s.output)
    # Refused at start-up (corrupt headers, foreign keys) or at the restore (a payload checksum).
    assert m["ingot_prompt_cache_disk_refused_total"] == 1
    assert m['ingot_prefix_cache_hits_total{tier="disk"}'] == 0
    assert r.usage.prompt_tokens_details.cached_tokens == 0
    assert "refused snapshot" in "".join(s.output)
    if damage != "foreign":  # (kv8 answers with its own rounding)
        assert [t for t, _ in answer(r)] == [t for t, _ in answer(reference)]


def test_no_disk_cache_writes_nothing(ingot_bin, tmp_path):
    cache = tmp_path / "c"
    s = smol(ingot_bin, "--cache-dir", str(cache), "--no-disk-cache")
    try:
        chat(s, "Say hi.", system=long_system(10))
        m = s.metrics()
    finally:
        s.stop()
    assert m["ingot_prompt_cache_disk_enabled"] == 0 and m["ingot_prompt_cache_disk_writes_total"] == 0
    assert not cache.exists()


def test_unusable_cache_dir_warns_and_serves(ingot_bin, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    s = smol(ingot_bin, "--cache-dir", str(blocker / "cache"))
    try:
        r = chat(s, "Say hi.", system=long_system(10))
        m = s.metrics()
    finally:
        s.stop()
    assert r.choices[0].message.content
    assert m["ingot_prompt_cache_disk_enabled"] == 0
    assert "no disk tier" in "".join(s.output)


def test_bad_cache_flags_are_clear_errors(ingot_bin, tmp_path):
    r = subprocess.run([ingot_bin, "serve", "--model", str(smollm2()), "--cache-disk-gb", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--cache-disk-gb must be > 0" in r.stderr


def test_disk_bound_holds_under_many_distinct_prompts_and_cache_verbs(ingot_bin, tiny_model, tmp_path):
    cache = tmp_path / "c"
    bound_gb = 0.0006  # a handful of the tiny model's snapshots
    s = Server(ingot_bin, tiny_model, "--cache-dir", str(cache), "--cache-disk-gb", str(bound_gb))
    n = 40
    client = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=60)
    try:
        for i in range(n):
            client.chat.completions.create(
                model="m", temperature=0, max_tokens=1,
                messages=[{"role": "system", "content": f"Prompt {i}. " + long_system(4)},
                          {"role": "user", "content": "Hi"}])

        def settled():
            m = s.metrics()
            return m["ingot_prompt_cache_disk_writes_total"] + m["ingot_prompt_cache_disk_dropped_total"] >= n
        wait_for(settled, "every snapshot written or dropped")
        m = s.metrics()
    finally:
        s.stop()
    on_disk = sum(p.stat().st_size for p in snapshots(cache))
    assert m["ingot_prompt_cache_disk_writes_total"] > 10
    assert m['ingot_prefix_cache_evictions_total{tier="disk"}'] > 0
    assert 0 < m["ingot_prompt_cache_disk_bytes"] <= bound_gb * 1e9
    assert 0 < on_disk <= bound_gb * 1e9
    files = len(snapshots(cache))

    def cache_cli(*args):
        return subprocess.run([ingot_bin, "cache", *args, "--cache-dir", str(cache)], capture_output=True, text=True,
                              timeout=60)
    ls = cache_cli("ls")
    assert ls.returncode == 0, ls.stderr
    assert str(tiny_model) in ls.stdout and f" {files} " in ls.stdout
    # gc: unreadable files go, then the total is bounded least recently used first.
    (cache_folder,) = [d for d in cache.iterdir()]
    (cache_folder / "junk.ikv").write_bytes(b"nope")
    bound = 2.5 * max(p.stat().st_size for p in snapshots(cache))
    gc = cache_cli("gc", "--max-gb", str(bound / 1e9))
    assert gc.returncode == 0, gc.stderr
    assert "removed 1 unreadable" in gc.stdout
    assert 1 <= len(snapshots(cache)) < files and sum(p.stat().st_size for p in snapshots(cache)) <= bound
    assert not (cache_folder / "junk.ikv").exists()
    # rm: a name that matches nothing is an error; a model's ID removes its folder.
    bad = cache_cli("rm", "no-such-model")
    assert bad.returncode != 0 and "no cached prompts for 'no-such-model'" in bad.stderr
    assert cache_cli("rm").returncode != 0
    rm = cache_cli("rm", cache_folder.name)
    assert rm.returncode == 0, rm.stderr
    assert not cache_folder.exists()
    assert "no cached prompts" in cache_cli("ls").stdout
