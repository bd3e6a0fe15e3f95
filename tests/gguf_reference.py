"""A numpy reference for llama-architecture GGUF files: weights dequantized
with the `gguf` package, llama.cpp's conventions (q/k rows as the converter
stores them, rope on adjacent pairs), float32 activations throughout."""
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


class GgufLlama:
    def __init__(self, path):
        r = GGUFReader(path)
        self.meta = {k: f.contents() for k, f in r.fields.items()
                     if not k.startswith("tokenizer.ggml.")}
        a = self.meta["general.architecture"]
        assert a == "llama", a
        m = lambda k, d=None: self.meta.get(f"{a}.{k}", d)
        self.n_layer = m("block_count")
        self.n_head = m("attention.head_count")
        self.n_kv = m("attention.head_count_kv", self.n_head)
        self.dim = m("embedding_length")
        self.head_dim = self.dim // self.n_head
        self.eps = m("attention.layer_norm_rms_epsilon")
        self.theta = m("rope.freq_base", 10000.0)
        self.w = {}
        for t in r.tensors:
            shape = [int(x) for x in reversed(t.shape)]
            self.w[t.name] = dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
        self.out = self.w.get("output.weight", self.w["token_embd.weight"])

    def _rms(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def _rope(self, x, pos):
        # x [T, H, D]; pairs (2i, 2i+1) rotate by pos * theta^(-2i/D).
        D = x.shape[-1]
        inv = self.theta ** (-np.arange(0, D, 2, dtype=np.float64) / D)
        ang = np.outer(pos, inv)
        c = np.cos(ang)[:, None, :].astype(np.float32)
        s = np.sin(ang)[:, None, :].astype(np.float32)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out

    def logits(self, ids, cache=None):
        """Logits [T, V] for `ids` continuing `cache` (a list of per-layer (k, v), updated)."""
        T, H, KV, D = len(ids), self.n_head, self.n_kv, self.head_dim
        if cache is None:
            cache = []
        past = cache[0][0].shape[0] if cache else 0
        x = self.w["token_embd.weight"][np.asarray(ids)]
        pos = np.arange(past, past + T)
        mask = np.triu(np.full((T, past + T), -np.inf, dtype=np.float32), past + 1)
        for i in range(self.n_layer):
            p = f"blk.{i}."
            h = self._rms(x, self.w[p + "attn_norm.weight"])
            q = (h @ self.w[p + "attn_q.weight"].T).reshape(T, H, D)
            k = (h @ self.w[p + "attn_k.weight"].T).reshape(T, KV, D)
            v = (h @ self.w[p + "attn_v.weight"].T).reshape(T, KV, D)
            q, k = self._rope(q, pos), self._rope(k, pos)
            if len(cache) > i:
                k = np.concatenate([cache[i][0], k]); v = np.concatenate([cache[i][1], v])
                cache[i] = (k, v)
            else:
                cache.append((k, v))
            rep = H // KV
            kk = np.repeat(k, rep, axis=1)
            vv = np.repeat(v, rep, axis=1)
            att = np.einsum("thd,shd->hts", q, kk) / np.sqrt(D) + mask
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            o = np.einsum("hts,shd->thd", att, vv).reshape(T, H * D)
            x = x + o @ self.w[p + "attn_output.weight"].T
            h = self._rms(x, self.w[p + "ffn_norm.weight"])
            g = h @ self.w[p + "ffn_gate.weight"].T
            u = h @ self.w[p + "ffn_up.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ self.w[p + "ffn_down.weight"].T
        x = self._rms(x, self.w["output_norm.weight"])
        return x @ self.out.T

    def greedy(self, ids, steps):
        """Prompt logits [T, V], greedy ids [steps] and the logits [steps, V] that chose them."""
        cache = []
        prompt = self.logits(ids, cache)
        lg = prompt[-1]
        out, step_logits = [], []
        for _ in range(steps):
            step_logits.append(lg)
            t = int(np.argmax(lg))
            out.append(t)
            lg = self.logits([t], cache)[-1]
        return prompt, out, np.stack(step_logits)
