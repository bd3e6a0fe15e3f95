"""`ingot run`: the terminal chat on SmolLM2-135M-Instruct (Q4_1 GGUF), driven
through a pseudo-terminal with pexpect as a person would type, and through a
pipe as a script would. Greedy answers are checked against `generate`, so the
conversation provably goes through the chat template and the engine."""
import json
import os
import re
import subprocess

import pexpect
import pytest

from smollm2_prompts import smollm2_path

STATS = r"\[(\d+) tokens, [\d.]+ tok/s; prompt (\d+) tokens"


@pytest.fixture(scope="module")
def gguf():
    return smollm2_path()


def spawn(ingot_bin, gguf, cwd, *extra):
    env = dict(os.environ, TERM="xterm")
    c = pexpect.spawn(ingot_bin, ["run", str(gguf), "--temp", "0", *extra], env=env, cwd=str(cwd),
                      encoding="utf-8", timeout=60, dimensions=(50, 250))
    c.expect_exact(">>> ")
    return c


def say(c, text):
    """Sends one turn; returns (completion tokens, prompt tokens) from the stats line."""
    c.sendline(text)
    c.expect(STATS)
    n, p = int(c.match.group(1)), int(c.match.group(2))
    c.expect_exact(">>> ")
    return n, p


def finish(c, code=0):
    c.expect(pexpect.EOF)
    c.close()
    assert c.exitstatus == code, (c.exitstatus, c.signalstatus)


def generate_chat(ingot_bin, gguf, messages, max_tokens):
    """The greedy reply `generate` gives after `messages` (rendered by chat-template)."""
    def run(*args, stdin):
        r = subprocess.run([ingot_bin, *args], input=stdin, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout
    prompt = run("chat-template", "--model", str(gguf),
                 stdin=json.dumps({"messages": messages, "add_generation_prompt": True}))
    ids = json.loads(run("tokenize", "--model", str(gguf), stdin=json.dumps([prompt])))[0]
    out = run("generate", "--model", str(gguf), "--kv", "paged", "--prompt-ids", ",".join(map(str, ids)),
              "--max-tokens", str(max_tokens), stdin="")
    return json.loads(run("tokenize", "--model", str(gguf), "--decode", "--skip-special",
                          stdin=json.dumps([[int(t) for t in out.strip().split(",")]])))[0]


def test_two_turns_save_clear_and_ctrl_d(ingot_bin, gguf, tmp_path):
    c = spawn(ingot_bin, gguf, tmp_path, "--max-tokens", "16")
    n1, p1 = say(c, "What is the capital of France?")
    n2, p2 = say(c, "And of Germany?")
    assert 0 < n1 <= 16 and 0 < n2 <= 16
    assert p2 > p1 + n1, "the second prompt holds the first turn"
    c.sendline("/save chat.json")
    c.expect("saved 2 turns")
    c.expect_exact(">>> ")
    c.sendline("/clear")
    c.expect("cleared")
    c.expect_exact(">>> ")
    _, p3 = say(c, "What is the capital of France?")
    assert p3 == p1, "after /clear the prompt is the first turn's again"
    c.sendeof()
    finish(c)
    saved = json.loads((tmp_path / "chat.json").read_text())
    m = saved["messages"]
    assert saved["model"] == "SmolLM2-135M-Instruct.Q4_1"
    assert [x["role"] for x in m] == ["user", "assistant", "user", "assistant"]
    assert m[1]["content"] == generate_chat(ingot_bin, gguf, m[:1], 16)
    assert m[3]["content"] == generate_chat(ingot_bin, gguf, m[:3], 16)


def test_ctrl_c_stops_the_answer_not_the_program(ingot_bin, gguf, tmp_path):
    c = spawn(ingot_bin, gguf, tmp_path, "--max-tokens", "400")
    c.sendline("List the numbers from 1 to 100.")
    c.expect_exact("100.")
    c.expect(r"\d+,\s*\d+,")  # the answer is streaming
    c.sendintr()
    c.expect(r"\[stopped\] " + STATS, timeout=15)
    assert int(c.match.group(1)) < 400
    c.expect_exact(">>> ")
    c.sendline("/save partial.json")
    c.expect("saved 1 turns")
    c.expect_exact(">>> ")
    # Ctrl-C on a half-typed line drops the line; at an empty prompt it hints, and a second one exits.
    c.send("half a line")
    c.expect_exact("half a line")  # the editor holds it
    c.sendintr()
    c.expect_exact(">>> ")
    c.sendintr()
    c.expect("Ctrl-C again")
    c.expect_exact(">>> ")
    c.sendintr()
    finish(c)
    m = json.loads((tmp_path / "partial.json").read_text())["messages"]
    assert m[1]["role"] == "assistant" and re.search(r"\d+,\s*\d+", m[1]["content"])


def test_system_set_and_bad_commands_keep_the_session(ingot_bin, gguf, tmp_path):
    c = spawn(ingot_bin, gguf, tmp_path, "--max-tokens", "8")
    c.sendline("/set temp hot")
    c.expect("is not a number")
    c.expect_exact(">>> ")
    c.sendline("/set top_p 2")
    c.expect("top_p must be in")
    c.expect_exact(">>> ")
    c.sendline("/set temp 0.7")
    c.expect(r"temp 0\.7")
    c.expect_exact(">>> ")
    c.sendline("/nonsense")
    c.expect("unknown command /nonsense")
    c.expect_exact(">>> ")
    c.sendline("/system You answer in one word.")
    c.expect("system prompt set")
    c.expect_exact(">>> ")
    say(c, "Hi")
    c.sendline("/save s.json")
    c.expect_exact(">>> ")
    c.sendline("/save /nonexistent-dir/x.json")
    c.expect("cannot write")
    c.expect_exact(">>> ")
    c.sendline("/bye")
    finish(c)
    m = json.loads((tmp_path / "s.json").read_text())["messages"]
    assert m[0] == {"role": "system", "content": "You answer in one word."}


def test_piped_stdin_is_one_turn_a_line(ingot_bin, gguf, tmp_path):
    lines = "What is the capital of France?\n/bogus\n\nAnd of Germany?"  # no newline at the end
    r = subprocess.run([ingot_bin, "chat", str(gguf), "--temp", "0", "--max-tokens", "16"], input=lines,
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 1, "a failed command fails a script"
    assert "unknown command /bogus" in r.stderr
    assert len(re.findall(STATS, r.stderr)) == 2, r.stderr
    assert "tok/s" not in r.stdout and "\033" not in r.stdout and ">>>" not in r.stdout
    first = generate_chat(ingot_bin, gguf, [{"role": "user", "content": "What is the capital of France?"}], 16)
    assert r.stdout.startswith(first + ("" if first.endswith("\n") else "\n"))
    ok = subprocess.run([ingot_bin, "run", str(gguf), "--max-tokens", "4"], input="Hi\n", capture_output=True,
                        text=True, timeout=120)
    assert ok.returncode == 0 and ok.stdout.strip() != "", ok.stderr


def test_bad_arguments_are_one_clear_error(ingot_bin, gguf, shared_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "INGOT_MODELS_DIR"))}
    env["HF_HUB_CACHE"] = str(tmp_path / "empty-cache")
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"  # nothing listens: a repo id cannot download
    cases = [(["no-such-model-anywhere"], "no-such-model-anywhere"),
             (["org/not-cached"], "org/not-cached"),
             ([str(gguf), "--temp", "-1"], "temperature"),
             ([str(gguf), "--top-p", "0"], "top_p"),
             ([str(gguf), "--ctx", "-5"], "--ctx"),
             ([str(gguf), "--file", "x.gguf"], "--file"),
             ([str(shared_dir / "goldens" / "llama-float32")], "tokenizer.json")]
    for args, needle in cases:
        r = subprocess.run([ingot_bin, "run", *args], input="hi\n", capture_output=True, text=True, timeout=60, env=env)
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("ingot: error:")]
        assert r.returncode == 1 and len(errors) == 1 and needle in errors[0], (args, r.stderr)
