"""A short soak run in CI (about 45 s): no 5xx, no crash, no unexpected
client error, 429s only from bursts past the queue limit, and resident memory
back within a bound of its warmed-up baseline. Long runs: soak.py."""
import json

import pytest

import soak

# Steady traffic fits in the running + waiting slots (4 + 12); bursts overflow them.
CLIENTS, DURATION_S, MAX_REQUESTS = 16, 40, 20000
RSS_BOUND_MB = 48


@pytest.fixture(scope="module")
def soak_server(ingot_bin, tiny_model):
    # The prefix cache is on (the default): every prompt is distinct, so each
    # request publishes an entry and abandoned streams exercise its eviction.
    s = soak.server_support().Server(ingot_bin, tiny_model, "--max-concurrency", "4", "--max-queue", "12")
    yield s
    s.stop()
    assert s.proc.returncode in (0, -15), "".join(s.output[-50:])


def test_soak_short(soak_server):
    r = soak.soak(soak_server, CLIENTS, DURATION_S, MAX_REQUESTS)
    print(json.dumps(r, indent=2))
    assert r["server_alive"], "".join(soak_server.output[-50:])
    assert not r["unexpected"], r
    assert r["served"] > 50, r
    assert r["disconnects"] > 0 and r["rejected_429"] > 0, r
    assert r["running_after"] == 0 and r["waiting_after"] == 0, r
    assert r["rss_after_mb"] - r["rss_baseline_mb"] <= RSS_BOUND_MB, r
    assert not any("ERROR" in line or "failed:" in line for line in soak_server.output), soak_server.output[-20:]
