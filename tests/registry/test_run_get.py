"""`ingot run REPO_ID` downloads a repository that is not cached (as `ingot get`
does, summary line included) and then chats; a second run uses the cache."""
from fake_hub import Repo
from test_gguf_get import smollm2_gguf


def test_run_downloads_then_uses_the_cache(ingot, hub):
    src = smollm2_gguf()
    repo_id = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
    hub.repos[repo_id] = Repo({"README.md": b"gguf\n", src.name: src.read_bytes()})
    chat = ["run", repo_id, "--temp", "0", "--max-tokens", "6"]
    first = ingot.run(*chat, input="Say hello.\n", timeout=120)
    assert f"{repo_id}: 2 files" in first.stderr and "tok/s" in first.stderr, first.stderr
    assert first.stdout.strip() != ""
    asked = len(hub.log)
    again = ingot.run(*chat, input="Say hello.\n", timeout=120)
    assert len(hub.log) == asked, "a cached repo id is not fetched again"
    assert again.stdout == first.stdout
    # A GGUF repository of several files needs --file; the error says so, and --file picks one.
    hub.repos["org/two-GGUF"] = Repo({"a.Q4_1.gguf": src.read_bytes(), "b.Q8_0.gguf": b"GGUF-other"})
    p = ingot.run("run", "org/two-GGUF", input="hi\n", ok=False)
    assert "--file" in p.stderr, p.stderr
    picked = ingot.run("run", "org/two-GGUF", "--file", "a.Q4_1.gguf", "--temp", "0", "--max-tokens", "6",
                       input="Say hello.\n", timeout=120)
    assert picked.stdout == first.stdout
    # An unknown repository: one clear error, nothing cached.
    p = ingot.run("run", "org/absent", input="hi\n", ok=False)
    assert "not found" in p.stderr.lower(), p.stderr
