"""`ingot serve --tensor-parallel 2` answers exactly like the whole model:
the same greedy completions for concurrent requests, with the prefix cache
forking and trimming every rank's cache."""
import concurrent.futures

import requests

from conftest import Server

PROMPTS = ["The quick brown fox", "Once upon a time", "The quick brown fox jumps", "Hello"]


def completions(url):
    def one(p):
        r = requests.post(url + "/v1/completions", json={"prompt": p, "max_tokens": 12, "temperature": 0},
                          timeout=60)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["text"]
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        return list(ex.map(one, PROMPTS * 2))


def test_split_server_matches_whole(ingot_bin, tiny_model):
    whole = Server(ingot_bin, tiny_model)
    try:
        want = completions(whole.url)
        assert all(want), want  # every prompt produced text to compare
    finally:
        whole.stop()
    split = Server(ingot_bin, tiny_model, "--tensor-parallel", "2")
    try:
        got = completions(split.url)
        assert got == want
        assert split.alive()
    finally:
        split.stop()
