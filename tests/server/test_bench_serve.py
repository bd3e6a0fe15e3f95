"""`ingot bench serve` against a running `ingot serve` (conftest's tiny
random llama): every request counted, ignore_eos honoured, numbers that agree
with each other; a server killed mid-run ends the run with a report that
counts the failed requests (exit status 3) instead of hanging; bad flags and
an unreachable server get one clear error line."""
import json
import subprocess
import time

import pytest

from conftest import Server, free_port

INPUT_LEN, OUTPUT_LEN, PROMPTS = 24, 12, 8


def bench(ingot_bin, *args, timeout=60):
    return subprocess.run([ingot_bin, "bench", *args], capture_output=True, text=True, timeout=timeout)


def overlapping(reqs):
    """Whether some request started while another was still running."""
    spans = sorted((r["start_ms"], r["start_ms"] + r["latency_ms"]) for r in reqs)
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


def test_every_request_is_counted(ingot_bin, server, tmp_path):
    out = tmp_path / "out.json"
    r = bench(ingot_bin, "serve", "--url", server.url, "--concurrency", "1,4", "--num-prompts", str(PROMPTS),
              "--input-len", str(INPUT_LEN), "--output-len", str(OUTPUT_LEN), "--seed", "5", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| concurrency |" in r.stdout and "TTFT ms p50 / p90 / p99" in r.stdout
    j = json.loads(out.read_text())
    assert j["errors"] == 0 and j["seed"] == 5 and j["output_len"] == OUTPUT_LEN
    assert j["model"] and j["endpoint"] == server.url + "/v1/completions"
    assert [lv["concurrency"] for lv in j["levels"]] == [1, 4]
    for lv in j["levels"]:
        assert lv["requests"] == lv["completed"] == PROMPTS
        assert lv["errors"] == 0 and set(lv["errors_by_kind"].values()) == {0}
        # ignore_eos honoured: exactly output-len tokens each, as the server's usage says.
        assert lv["output_len_mismatch"] == 0 and lv["usage_reported"] == PROMPTS
        assert lv["total_output_tokens"] == PROMPTS * OUTPUT_LEN
        assert lv["total_input_tokens"] == PROMPTS * INPUT_LEN
        for req in lv["per_request"]:
            assert req["error"] is None and req["http_status"] == 200
            assert req["output_tokens"] == OUTPUT_LEN and req["usage_prompt_tokens"] == INPUT_LEN
            assert 0 < req["ttft_ms"] <= req["latency_ms"]
            assert req["tpot_ms"] > 0
            assert req["tpot_ms"] == pytest.approx((req["latency_ms"] - req["ttft_ms"]) / (OUTPUT_LEN - 1))
            assert len(req["itl_ms"]) == req["text_chunks"] - 1 and all(x >= 0 for x in req["itl_ms"])
        last_end = max(q["start_ms"] + q["latency_ms"] for q in lv["per_request"]) / 1e3
        assert lv["duration_s"] == pytest.approx(last_end, abs=0.01)
        assert lv["output_throughput"] == pytest.approx(lv["total_output_tokens"] / lv["duration_s"])
        assert lv["request_throughput"] == pytest.approx(PROMPTS / lv["duration_s"])
        # A 2-layer, 64-wide model on this machine: well above 10 tok/s, well below a million.
        assert 10 < lv["output_throughput"] < 1e6
        for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
            d = lv[key]
            assert 0 <= d["p50"] <= d["p90"] <= d["p99"], key
        assert lv["tpot_ms"]["p50"] < lv["e2el_ms"]["p50"]
    # Concurrency 1 runs one request at a time; 4 overlaps them.
    assert not overlapping(j["levels"][0]["per_request"])
    assert overlapping(j["levels"][1]["per_request"])


def test_request_rate_and_shared_prefix(ingot_bin, server, tmp_path):
    out = tmp_path / "rate.json"
    r = bench(ingot_bin, "serve", "--url", server.url, "--request-rate", "50", "--num-prompts", "6", "--input-len", "8",
              "--prefix-len", "32", "--output-len", "4", "--seed", "2", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| request rate" in r.stdout
    lv = json.loads(out.read_text())["levels"][0]
    assert lv["request_rate"] == 50 and lv["concurrency"] is None
    assert lv["completed"] == 6 and lv["total_input_tokens"] == 6 * 40
    starts = [q["start_ms"] for q in lv["per_request"]]
    assert starts == sorted(starts) and starts[-1] > 0  # Poisson arrivals, not all at once


def test_killed_server_ends_the_run_with_counted_failures(ingot_bin, tiny_model, tmp_path):
    s = Server(ingot_bin, tiny_model)
    out = tmp_path / "killed.json"
    n = 400
    p = subprocess.Popen([ingot_bin, "bench", "serve", "--url", s.url, "--concurrency", "4", "--num-prompts", str(n),
                          "--input-len", "16", "--output-len", "64", "--seed", "1", "--timeout", "20",
                          "--json", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 30
        # The probe and a few measured requests finish, then the server dies.
        while s.metrics().get('ingot_request_finish_total{reason="length"}', 0) < 6:
            assert time.time() < deadline and p.poll() is None, "the run did not get going"
            time.sleep(0.05)
        s.proc.kill()
        s.proc.wait(timeout=10)
        stdout, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
        s.stop()
    assert p.returncode == 3, stdout + stderr
    lv = json.loads(out.read_text())["levels"][0]
    assert lv["requests"] == n
    assert 3 <= lv["completed"] < n
    assert lv["errors"] == n - lv["completed"]
    assert lv["errors_by_kind"]["connection"] == lv["errors"]
    assert lv["errors_by_kind"]["timeout"] == 0
    failed = [q for q in lv["per_request"] if q["error"]]
    assert len(failed) == lv["errors"] and all(q["error"]["kind"] == "connection" for q in failed)
    assert f"concurrency 4: {lv['errors']} of {n} requests failed (connection {lv['errors']})" in stdout


def assert_one_error_line(r, needle):
    """The CLI's contract for bad input: exit 1 and one line on stderr that says why."""
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 1 and len(lines) == 1 and needle in lines[0], (r.returncode, r.stderr)


def test_unreachable_server_and_bad_flags(ingot_bin, server, tiny_model):
    r = bench(ingot_bin, "serve", "--url", f"http://127.0.0.1:{free_port()}", timeout=30)
    assert_one_error_line(r, "cannot reach")
    r = bench(ingot_bin, "serve", "--url", f"http://127.0.0.1:{free_port()}", "--model", "m", timeout=30)
    assert_one_error_line(r, "did not complete a test request (connection)")
    # The server answers, but not with what the run needs (a server that refuses unknown model names).
    strict = Server(ingot_bin, tiny_model, "--strict-model-name")
    try:
        r = bench(ingot_bin, "serve", "--url", strict.url, "--model", "no-such-model", timeout=30)
        assert_one_error_line(r, "did not complete a test request (http): HTTP 404")
    finally:
        strict.stop()
    r = bench(ingot_bin, "serve", "--url", server.url, "--vocab-range", "0:99999999", timeout=30)
    assert_one_error_line(r, "out of range")
    for args, message in [(["--concurrency", "0"], "--concurrency"),
                          (["--concurrency", "1", "--request-rate", "2"], "not both"),
                          (["--max-concurrency", "2"], "--request-rate"), (["--output-len", "0"], "--output-len"),
                          (["--input-len", "0"], "a prompt needs a token"), (["--vocab-range", "9:3"], "--vocab-range"),
                          (["--request-rate", "0"], "--request-rate"), (["--extra-body", "[1]"], "--extra-body"),
                          (["--timeout", "0"], "--timeout")]:
        assert_one_error_line(bench(ingot_bin, "serve", "--url", server.url, *args, timeout=30), message)
    assert_one_error_line(bench(ingot_bin, "serve", "--url", "localhost:8080", timeout=30), "--url must start with http://")
