"""A burst of new streaming connections, all opened at once against an
`ingot serve` with its default limits: every one is accepted and answered in
full (no reset, no refusal), more of them than decode at once included."""
import json
import subprocess

import pytest

from conftest import Server

INPUT_LEN, OUTPUT_LEN = 16, 6


@pytest.fixture(scope="module")
def burst_server(ingot_bin, tiny_model):
    s = Server(ingot_bin, tiny_model)
    yield s
    s.stop()


@pytest.mark.parametrize("streams", [64, 256])
def test_burst_of_new_streams_is_answered_in_full(ingot_bin, burst_server, tmp_path, streams):
    out = tmp_path / "burst.json"
    # A closed loop at `streams` with exactly `streams` requests: every connection opens in the first instant.
    r = subprocess.run([ingot_bin, "bench", "serve", "--url", burst_server.url, "--concurrency", str(streams),
                        "--num-prompts", str(streams), "--input-len", str(INPUT_LEN), "--output-len", str(OUTPUT_LEN),
                        "--seed", "3", "--timeout", "60", "--json", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lv = json.loads(out.read_text())["levels"][0]
    assert lv["errors"] == 0 and set(lv["errors_by_kind"].values()) == {0}, lv["errors_by_kind"]
    assert lv["completed"] == streams
    assert lv["total_output_tokens"] == streams * OUTPUT_LEN
    assert all(q["http_status"] == 200 and q["error"] is None for q in lv["per_request"])
    assert burst_server.alive()
