"""Writes tests/data/tokenizer_corpus.json: the deterministic string corpus for
tokenizer parity (multilingual text, emoji ZWJ sequences, code, whitespace,
contractions, numbers, special-token text, odd Unicode). Re-run to regenerate;
the output depends only on this file."""
import json
import pathlib
import random

FRAGMENTS = [
    # English, contractions
    "Hello, world!", "The quick brown fox jumps over the lazy dog.", "I'm sure you'll see what they've done.",
    "DON'T SHOUT, it's RUDE", "we'LL", "she'd've", "It’s a curly apostrophe’s test", "rock 'n' roll",
    "y'all'd", "O'Neil's", "'s 't 're 've 'm 'll 'd", "Mr. Smith went to Washington D.C. in 1999.",
    # European
    "Straße, Größe, Übermaß", "Ça va? Où est la bibliothèque?", "¿Dónde está el baño? ¡Olé!",
    "Привет, как дела? Съешь же ещё этих мягких французских булок.", "Γειά σου Κόσμε", "Zażółć gęślą jaźń",
    "Ærøskøbing fjord", "İstanbul'da ılık bir gün", "Češka řeč", "Vợ chồng tôi đi Hà Nội", "Ελληνικά ΆΈΉ",
    # CJK
    "日本語のテキストを処理します。", "中文文本，包含标点符号！", "한국어 문장입니다.", "東京タワーは高い", "ｶﾀｶﾅ　全角スペース",
    "我爱北京天安门", "漢字と仮名が混ざった文", "繁體中文測試", "𠀋𠂢𠃌 astral CJK",
    # RTL and Indic
    "مرحبا بالعالم", "اللغة العربية جميلة ١٢٣٤", "שלום עולם", "नमस्ते दुनिया", "हिन्दी में लिखा गया वाक्य।",
    "ক্ষুধার্ত বাংলা", "தமிழ் மொழி", "ภาษาไทยไม่มีช่องว่าง", "ᐃᓄᒃᑎᑐᑦ", "ⴰⵣⵓⵍ", "ᏣᎳᎩ",
    # emoji
    "👨‍👩‍👧‍👦", "🏳️‍🌈", "👍🏽", "🧑🏿‍💻 coding", "❤️‍🔥", "🇯🇵🇺🇸🇩🇪", "😀😃😄😁", "🫠🫡🥹", "👩‍❤️‍💋‍👨",
    "#️⃣ keycap", "☺︎ text style ☺️ emoji style",
    # code
    "def f(x):\n    return x ** 2\n", "int main() { return 0; }", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "const x = async () => { await fetch('/api?q=1&b=2'); };", '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}',
    "<div class=\"container\"><p>Hello</p></div>", "SELECT * FROM users WHERE id = 42;", "$ ls -la | grep '^d' > out.txt",
    "x = [i for i in range(10) if i % 2 == 0]", "#include <vector>\nstd::vector<int> v{1,2,3};", "a+=b; c-=d; e*=f; g/=h;",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }", "    indented with spaces", "\tindented with a tab",
    "if x == None:\n\t\tpass\n\n\n", "/* comment */ // line comment", "print(f\"{name!r:>10}\")", "a_b_c __init__ self.__dict__",
    # whitespace
    " ", "  ", "   ", "    ", "        ", "\t", "\t\t", "\n", "\n\n", "\n\n\n\n", "\r\n", "\r\n\r\n", "\r", " \n ", "\t \t",
    "trailing spaces   ", "   leading spaces", "mid   dle  spa    ces", "line1\nline2\r\nline3\rline4", "\u00a0nbsp\u00a0",
    "ideographic\u3000space", "thin\u2009space", "zero\u200bwidth", "\u2028line sep\u2029para sep", "\ufeffBOM start",
    "\x0bvertical\x0ctab", "\x85next line",
    # numbers
    "0", "7", "42", "123", "1234", "12345", "123456789", "3.14159", "2.718281828459045", "1,000,000", "1e10", "-0.5",
    "+1 (555) 123-4567", "2024-12-02T14:30:00Z", "0xDEADBEEF", "v1.2.3-beta.4", "100%", "$19.99", "€5,50", "١٢٣ ٤٥٦",
    "१२३४५", "½ ¾ ⅓", "①②③", "Ⅻ Ⅳ", "²³¹", "10^9+7", "3/4",
    # special-token text (real and near misses)
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "<think>\nreasoning\n</think>", "<tool_call>{\"name\": \"f\"}</tool_call>", "<|begin_of_text|>", "<|eot_id|>",
    "<|start_header_id|>system<|end_header_id|>\n\n", "<|reserved_special_token_5|>", "<|python_tag|>", "<bos>", "<eos>",
    "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", "<pad>", "<unk>", "<mask>", "<s>", "</s>",
    "<s>[INST] question [/INST] answer</s>", "[INST]", "<|im_start", "im_end|>", "< s>", "</s >", "<<s>>", "<s><s></s>",
    "<start_of_image>", "<|fim_prefix|>x<|fim_suffix|>y<|fim_middle|>", "<|vision_start|>", " <|im_end|> ",
    "text<|endoftext|>more", "<0x0A>", "▁", "▁▁hello▁", "Ġ", "ĠĠ",
    # odd Unicode
    "e\u0301 vs \u00e9", "A\u030a vs \u00c5", "ﬁ ﬂ ﬃ", "ｆｕｌｌｗｉｄｔｈ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝐛𝐨𝐥𝐝", "Ω Ω", "K K",
    "\u1100\u1161\u11a8 jamo", "\u0000null\u0000", "\x01\x02\x03\x1f\x7f", "\ue000 private use", "\U0010fffd",
    "\u180e mongolian", "\u200d\u200c joiners", "\u0301 leading combining", "a\u0308\u0301\u0323", "ß ẞ",
    "ŉ ǰ", "Σίσυφος ΣΊΣΥΦΟΣ", "\ufffd replacement", "⁉‼", "“quotes” ‘single’ «guillemets» „low“", "— – ‐ ‒",
    "…", "·•●", "™ ® ©", "→ ← ↑ ↓ ⇒", "∀x∈ℝ: x²≥0", "∑∫∂√∞", "♠♣♥♦", "🀄🃏", "⠁⠃⠉", "ℌℑℜ",
]

SEPARATORS = ["", " ", "  ", "\n", "\t", "\r\n", " \n", "\n\n", ", ", ". ", "   ", "\u3000"]

BLOCKS = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
          (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x3040, 0x30FF), (0x4E00, 0x9FFF),
          (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1F6FF), (0x1F900, 0x1F9FF), (0x10000, 0x1007F)]


def random_codepoints(rng):
    out = []
    for _ in range(rng.randint(1, 24)):
        lo, hi = rng.choice(BLOCKS)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def make(count=5200, seed=20261202):
    rng = random.Random(seed)
    corpus = list(FRAGMENTS)
    corpus.append("")
    while len(corpus) < count:
        kind = rng.random()
        if kind < 0.15:
            corpus.append(random_codepoints(rng))
        elif kind < 0.25:  # whitespace runs around words
            ws = "".join(rng.choice([" ", "\t", "\n", "\r\n", "\u00a0"]) for _ in range(rng.randint(1, 9)))
            corpus.append(rng.choice(FRAGMENTS) + ws + rng.choice(FRAGMENTS))
        elif kind < 0.32:  # numbers of many lengths
            corpus.append(" ".join(str(rng.randint(0, 10 ** rng.randint(1, 15))) for _ in range(rng.randint(1, 4))))
        else:
            parts = [rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 5))]
            text = parts[0]
            for p in parts[1:]:
                text += rng.choice(SEPARATORS) + p
            corpus.append(text)
    return corpus


if __name__ == "__main__":
    out = pathlib.Path(__file__).resolve().parent / "data" / "tokenizer_corpus.json"
    out.write_text(json.dumps(make(), ensure_ascii=True, indent=0) + "\n")
    print(f"wrote {out}")
