"""Writes the committed seed corpora under fuzz/corpus/ (run once; the output
is checked in): small valid inputs of each format plus a few edge cases.
KV snapshot seeds are written at run time by make_kv_snapshot_seed.
Usage: python3 fuzz/make_seeds.py [shared_dir]"""
import json
import pathlib
import struct
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent
CORPUS = ROOT / "corpus"
SHARED = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ROOT.parent.parent / "shared")


def put(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def safetensors_seeds():
    from safetensors.numpy import save
    put("safetensors", "two-tensors", save({"a": np.arange(6, dtype=np.float32).reshape(2, 3),
                                            "b": np.ones(4, np.float16)}, metadata={"format": "pt"}))
    put("safetensors", "scalar-and-empty", save({"s": np.array(3, np.int64), "e": np.zeros((0, 4), np.float32)}))
    put("safetensors", "bf16-like-u16", save({"w": np.arange(8, dtype=np.uint16).reshape(2, 4)}))
    def raw(header):
        h = json.dumps(header).encode()
        return struct.pack("<Q", len(h)) + h
    put("safetensors", "overlap", raw({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                       "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}) + b"\0" * 12)
    put("safetensors", "huge-length", struct.pack("<Q", 1 << 62) + b"{}")
    put("safetensors", "empty-header", raw({}))


def gguf_seeds():
    import gguf
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "t.gguf"
        w = gguf.GGUFWriter(str(path), "llama")
        w.add_block_count(1)
        w.add_context_length(64)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2")
        toks = ["a", "b", "ab", "Ġ", "Ġa", "<|im_end|>"]
        w.add_token_list(toks)
        w.add_token_types([1, 1, 1, 1, 1, 3])
        w.add_token_merges(["a b", "Ġ a"])
        w.add_eos_token_id(5)
        w.add_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}")
        w.add_array("test.floats", [1.5, -2.0])
        w.add_string("test.s", "x")
        w.add_tensor("w", np.arange(32, dtype=np.float32).reshape(1, 32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        put("gguf", "tiny-gpt2-tokenizer", path.read_bytes())
        w = gguf.GGUFWriter(str(path), "llama")
        w.add_tokenizer_model("llama")
        w.add_token_list(["<unk>", "<s>", "</s>", "<0x41>", "▁", "a", "▁a"])
        w.add_token_scores([0.0, 0.0, 0.0, 0.0, -1.0, -2.0, -0.5])
        w.add_token_types([2, 3, 3, 6, 1, 1, 1])
        w.add_tensor("q", np.zeros((2, 32), np.float16))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        put("gguf", "tiny-llama-tokenizer", path.read_bytes())
    put("gguf", "magic-only", b"GGUF" + struct.pack("<IQQ", 3, 0, 0))
    put("gguf", "huge-counts", b"GGUF" + struct.pack("<IQQ", 3, 1 << 60, 1 << 60))


def tokenizer_seeds():
    for name in ("qwen3", "llama3_1", "mistral-7b", "gemma3"):
        src = SHARED / "assets" / "tokenizers" / name / "tokenizer.json"
        if not src.exists():
            raise SystemExit(f"missing {src}")
        tok = json.loads(src.read_text())
        vocab = tok["model"]["vocab"]
        keep = dict(sorted(vocab.items(), key=lambda kv: kv[1])[:300])
        ids = {v: i for i, v in enumerate(sorted(keep.values()))}
        small = {k: ids[v] for k, v in keep.items()}
        merges = []
        for m in tok["model"].get("merges", []):
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            if a in small and b in small and a + b in small:
                merges.append(m)
        tok["model"]["vocab"] = small
        tok["model"]["merges"] = merges[:200]
        tok["added_tokens"] = [dict(t, id=len(small) + i) for i, t in enumerate(tok.get("added_tokens", [])[:4])]
        put("tokenizer_json", name, json.dumps(tok, ensure_ascii=False))
    put("tokenizer_json", "minimal-bpe", json.dumps({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
                                                               "merges": ["a b"]}}))
    put("tokenizer_json", "bad-regex", json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                                                   "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(("},
                                                                     "behavior": "Isolated"}}))


def template_seeds():
    for p in sorted((ROOT.parent / "tests" / "data" / "templates").glob("*.jinja")):
        if p.stat().st_size <= 8192:
            put("chat_template", p.stem, p.read_bytes())
    put("chat_template", "macro-recursion", "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}")
    put("chat_template", "filters", "{{ messages | map(attribute='role') | join(',') | upper }}{{ '%d' % 3 }}"
        "{{ (tools | tojson(indent=2))[:10] }}{% set ns = namespace(x=0) %}{% for m in messages|reverse %}"
        "{% set ns.x = ns.x + loop.index %}{% endfor %}{{ ns.x }}{{ raise_exception('no') if false }}")
    put("chat_template", "unterminated", "{% for m in messages %}{{ m.content")


def http_seeds():
    routes = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/messages",
              "/v1/messages/count_tokens", "/tokenize", "/detokenize", "/v1/models", "/v1/models/test-model",
              "/metrics", "/health"]
    def seed(name, route, body, auth=True):
        sel = routes.index(route) | (0x80 if auth else 0)
        put("http_routes", name, bytes([sel]) + (body if isinstance(body, bytes) else json.dumps(body).encode()))
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    seed("chat", "/v1/chat/completions", {"messages": msgs, "max_tokens": 5, "temperature": 0.5, "stop": ["x"],
                                          "logprobs": True, "top_logprobs": 2, "seed": 1})
    seed("chat-stream-tools", "/v1/chat/completions", {
        "messages": msgs + [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "1"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "tool_choice": "auto", "stream": True, "stream_options": {"include_usage": True}})
    seed("chat-parts", "/v1/chat/completions", {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}], "n": 1, "logit_bias": {"65": -100}})
    seed("completion", "/v1/completions", {"prompt": "Once", "max_tokens": 3, "echo": True, "logprobs": 1})
    seed("completion-ids-stream", "/v1/completions", {"prompt": [72, 105], "stream": True, "suffix": None})
    seed("embeddings", "/v1/embeddings", {"input": ["a", "b"], "model": "test-model"})
    seed("responses", "/v1/responses", {"input": [{"role": "user", "content": "hi"}], "instructions": "x",
                                        "max_output_tokens": 4, "store": True})
    seed("responses-stream", "/v1/responses", {"input": "hi", "stream": True, "previous_response_id": "resp_x"})
    seed("messages", "/v1/messages", {"model": "m", "max_tokens": 8, "system": "s", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}], "stream": True})
    seed("count-tokens", "/v1/messages/count_tokens", {"messages": [{"role": "user", "content": "hi"}]})
    seed("tokenize", "/tokenize", {"content": "hello", "add_special": True})
    seed("detokenize", "/detokenize", {"tokens": [104, 105, 256]})
    seed("models", "/v1/models", b"")
    seed("model", "/v1/models/test-model", b"")
    seed("unauthorized", "/v1/chat/completions", {"messages": msgs}, auth=False)
    seed("deep-nesting", "/v1/chat/completions", b"[" * 2000)
    seed("not-json", "/v1/completions", b"\xff\xfe{prompt")


def audio_seeds():
    # 0.05 s clips: a tone and silence in the containers uploads use.
    fmts = [("wav", ["-c:a", "pcm_s16le"]), ("flac", []), ("mp3", ["-b:a", "32k"]), ("ogg", ["-c:a", "libvorbis"]),
            ("wav-f32", ["-c:a", "pcm_f32le", "-f", "wav"])]
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in fmts:
            ext = name.split("-")[0]
            out = pathlib.Path(tmp) / f"a.{ext}"
            subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                            "sine=frequency=440:sample_rate=8000:duration=0.05", *args, str(out)], check=True)
            put("audio", name, out.read_bytes())
    put("audio", "riff-header-only", b"RIFF\x24\x00\x00\x00WAVEfmt ")


def multipart_seeds():
    # Input: the Content-Type header, "\n", then the body (fuzz/fuzz_multipart.cpp).
    def seed(name, content_type, body):
        put("multipart", name, content_type.encode() + b"\n" + body)
    def part(name, value, extra=""):
        return (f'Content-Disposition: form-data; name="{name}"{extra}\r\n\r\n').encode() + value + b"\r\n"
    b = "b0undary"
    def form(*parts, boundary=b, close=True):
        out = b"".join(b"--" + boundary.encode() + b"\r\n" + p for p in parts)
        return out + (b"--" + boundary.encode() + b"--\r\n" if close else b"")
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80\x3e\x00\x00"
    t = f"multipart/form-data; boundary={b}"
    seed("transcription", t, form(part("model", b"whisper-1"), part("response_format", b"verbose_json"),
                                  part("timestamp_granularities[]", b"segment"),
                                  b'Content-Disposition: form-data; name="file"; filename="clip.wav"\r\n'
                                  b"Content-Type: audio/wav\r\n\r\n" + wav + b"\r\n"))
    # What python-requests and browsers send: a long dash boundary, a quoted one, a charset.
    wk = "----WebKitFormBoundary7MA4YWxkTrZu0gW"
    seed("webkit-boundary", f"multipart/form-data; boundary={wk}",
         form(part("file", b"\x00\x01\r\n--" + wk[:10].encode(), '; filename="C:\\dir\\a \\"b\\".wav"'),
              boundary=wk))
    seed("quoted-boundary", 'Multipart/Form-Data; charset=utf-8; boundary="a b:c"',
         b"preamble\r\n" + form(part("prompt", b"earlier words"), boundary="a b:c") + b"epilogue")
    seed("padding-and-headers", t, b"--b0undary \t\r\ncontent-disposition: FORM-DATA; NAME=x\r\n"
         b"Content-Type:  text/plain \r\nX-Other: y\r\n\r\nv\r\n--b0undary--")
    seed("empty-form", t, b"--b0undary--")
    seed("empty-part", t, form(part("", b"")))
    seed("truncated", t, form(part("model", b"whisper-1"), part("file", wav, '; filename="a.wav"'), close=False)[:-9])
    seed("no-closing-boundary", t, form(part("model", b"whisper-1"), close=False))
    seed("no-boundary-param", "multipart/form-data", form(part("model", b"x")))
    seed("wrong-boundary", t, form(part("model", b"x"), boundary="other"))
    seed("no-disposition", t, b"--b0undary\r\nContent-Type: a\r\n\r\nx\r\n--b0undary--")
    seed("garbled-header", t, b"--b0undary\r\n\xff\xfe no colon\r\n\r\nx\r\n--b0undary--")
    seed("unterminated-quote", t, b'--b0undary\r\nContent-Disposition: form-data; name="a\r\n\r\nx\r\n--b0undary--')
    seed("many-parts", t, form(*[part(f"f{i}", b"v") for i in range(20)]))
    seed("json-type", "application/json; boundary=x", b'{"file": "x"}')


def completion_stream_seeds():
    """Streamed /v1/completions bodies; the first byte picks the read size."""
    def seed(name, piece, body):
        put("completion_stream", name, bytes([piece]) + body)

    def chunk(text, finish=None):
        c = {"id": "cmpl-1", "object": "text_completion", "choices": [
            {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}], "usage": None}
        return b"data: " + json.dumps(c).encode() + b"\n\n"
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":3,"total_tokens":11}}\n\n'
    done = b"data: [DONE]\n\n"
    seed("complete", 0, chunk("a") + chunk(" b") + chunk("c", "length") + usage + done)
    seed("crlf-keepalive", 4, b": ping\r\n\r\n" + chunk("x").replace(b"\n", b"\r\n") + chunk("", "stop") + done)
    seed("no-usage", 1, chunk("\u00e9") + chunk("z", "stop"))
    seed("unfinished", 2, chunk("a") + chunk("b"))
    seed("error-event", 3, chunk("a") + b'data: {"error":{"message":"engine failed","code":500}}\n\n')
    seed("malformed", 5, b"data: {\"choices\": [\n\n" + done)
    seed("multiline-data", 6, b'data: {"choices":\ndata: [{"text":"q","finish_reason":"stop"}]}\n\n')
    seed("negative-usage", 7, chunk("a", "stop") + b'data: {"choices":[],"usage":{"completion_tokens":-5}}\n\n')
    seed("after-done", 8, chunk("a", "stop") + done + b"data: garbage\n\n")


if __name__ == "__main__":
    safetensors_seeds()
    gguf_seeds()
    tokenizer_seeds()
    template_seeds()
    http_seeds()
    multipart_seeds()
    audio_seeds()
    completion_stream_seeds()
