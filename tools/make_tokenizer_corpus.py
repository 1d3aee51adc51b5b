#!/usr/bin/env python3
"""Builds tests/fixtures/tokenizer/corpus.jsonl: the texts the tokenizer corpus test and the
tokenizer bench run on, one JSON string per line (so texts may hold newlines).

Deterministic (fixed seed, no input files): rerunning gives the same bytes. Lines mix
fragments from many scripts, emoji (ZWJ sequences, skin tones, flags, keycaps), code,
whitespace runs, tabs and newlines, digits, special-token look-alikes, Unicode
normalization cases (NFC vs NFD, compatibility characters) and odd-but-valid text
(controls, U+FFFD, noncharacters, lone combining marks, private use).

Usage: tools/make_tokenizer_corpus.py [--out PATH] [--lines N]
"""
import argparse
import json
import random
import unicodedata
from pathlib import Path

SCRIPTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Once upon a time, there was a little girl named Lily who loved to play outside.",
    "She said: \"I can't, won't, shouldn't; they'll've gone.\" It's John's dog's bone.",
    "Größenwahn, Straßenbahnhaltestelle und Donaudampfschifffahrtsgesellschaft.",
    "L'été dernier, nous sommes allés à Noël chez ma grand-mère à Montréal.",
    "¿Dónde está la biblioteca? ¡Mañana será otro día, señor Muñoz!",
    "Não há açúcar no pão; a situação é complicada.",
    "Cửa Việt là một cửa biển ở tỉnh Quảng Trị, Việt Nam.",
    "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Τάχιστη αλώπηξ βαφής ψημένη γη, δρασκελίζει υπέρ νωθρού κυνός.",
    "我能吞下玻璃而不伤身体。今天天气很好，我们去公园散步吧！",
    "我能吞下玻璃而不傷身體。繁體中文與簡體中文並存。",
    "いろはにほへと ちりぬるを わかよたれそ つねならむ。カタカナもあります。",
    "키스의 고유조건은 입술끼리 만나야 하고 특별한 기술은 필요치 않다.",
    "نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر.",
    "דג סקרן שט בים מאוכזב ולפתע מצא חברה.",
    "ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम।",
    "เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน",
    "ខ្ញុំអាចញ៉ាំកញ្ចក់បាន ដោយគ្មានបញ្ហា",
    "ვეპხის ტყაოსანი შოთა რუსთაველი",
    "Բարեւ աշխարհ, ինչպե՞ս ես։",
    "ሰማይ አይታረስ ንጉሥ አይከሰስ።",
    "ʃəˈwɑːz ðə ˈkwɪk ˈbraʊn fɒks — IPA: [ˈtʃɛk]",
    "∀x∈ℝ: x² ≥ 0, ∑ᵢ aᵢ = ∫₀^∞ e^(−t) dt ≈ 1.0 ± 0.01",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝓶𝓪𝓽𝓱 𝕒𝕝𝕡𝕙𝕒𝕓𝕖𝕥𝕤 and 𐍈 Gothic, 𓂀 hieroglyph",
]

EMOJI = [
    "😀", "🙃", "🦙", "🚀", "🔥", "❤️", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🏴‍☠️", "🇩🇪", "🇯🇵", "🇺🇸",
    "1️⃣", "#️⃣", "🧑🏿‍🚀", "🫠", "☕", "✅", "⚠️", "🤷‍♀️", "👁️‍🗨️", "🧔🏻‍♂️",
]

CODE = [
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "#include <vector>\nint main() { std::vector<int> v{1, 2, 3}; return v.size(); }",
    "{\"name\": \"orzo\", \"version\": \"0.1.0\", \"tags\": [\"llm\", \"c++\"]}",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "$ git commit -m 'fix: handle \\r\\n' && ./build.sh --jobs=2 2>&1 | tee log.txt",
    "<div class=\"row\"><a href=\"https://example.com/?q=a&b=c#x\">link</a></div>",
    "const f = async (x) => { await sleep(100); return x ?? 0; };",
    "fn main() { let v: Vec<u8> = b\"hello\".to_vec(); println!(\"{:?}\", v); }",
    "    if x:\n        pass\n    elif y:\n\t\treturn None\n",
    "0xDEADBEEF 0b1010 1e-9 3.14159 -42 1_000_000 0o755",
    "aGVsbG8gd29ybGQ= ZGVhZGJlZWY= /usr/local/lib/python3.11/site-packages/",
]

SPECIAL_LOOKALIKES = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>", "[INST]", "[/INST]",
    "<|user|>", "<|assistant|>", "<|end|>", "<|system|>", "<think>", "</think>", "<tool_call>",
    "<|im_end", "|im_end|>", "< s>", "<s >", "<<s>>", "<0x41>", "<0xE2><0x96>", "<|placeholder1|>",
    "<|reserved_special_token_0|>", "[/INST ]", "<|vision_start|>", "<|fim_prefix|>",
]

WHITESPACE = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000",
              "\u2009", "\u200b", " \t \n", "\n\n\n\n", "        "]

ODD = [
    "\ufffd", "\ufeffBOM", "\u0000nul", "\u0007bell\u001b[0m", "\u007f", "\ufffe", "\uffff",
    "\u0301starts with a combining acute", "a\u0308\u0301\u0323", "\u200d", "\u200c", "\ue000\uf8ff",
    "\U0010fffd", "x\u034fy", "\u202eRTL override\u202c", "\u2028line sep\u2029", "\\x80\\xff", "%C3%A9",
    "\u0000\u0001\u0002", "\U0001f3fb", "e\u0301\u0301\u0301", "\u1100\u1161\u11a8",
]

NORMALIZATION = [
    "café", "cafe\u0301", "Å", "A\u030a", "\u212b", "ﬁ ﬂ ﬃ", "①②③", "ｆｕｌｌｗｉｄｔｈ", "㍿", "Ǆǅǆ",
    "한국어", unicodedata.normalize("NFD", "한국어"), unicodedata.normalize("NFD", "Việt Nam"),
    "ñ", "n\u0303", "\u1e9b\u0323", "ḱṷṓn", unicodedata.normalize("NFD", "ḱṷṓn"), "Ω", "\u2126", "K", "\u212a",
]

DIGITS = ["0", "7", "42", "123", "1234", "12345", "123456789", "3.14", "2024-05-15", "1,000,000",
          "+1 (555) 010-9999", "٣٤٥", "१२३", "①", "½", "10^9", "v1.2.3-rc.4"]

WORDS = ("the of and to in is you that it he was for on are as with his they at be this have from "
         "or one had by word but not what all were we when your can said there use an each which "
         "she do how their if will up other about out many then them these so some her would make "
         "like him into time has look two more write go see number no way could people my than first "
         "water been call who oil its now find long down day did get come made may part").split()


def fragment(rng):
    kind = rng.random()
    if kind < 0.30:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))
    if kind < 0.45:
        s = rng.choice(SCRIPTS)
        a = rng.randrange(len(s))
        return s[a:a + rng.randint(1, 40)]
    if kind < 0.53:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4)))
    if kind < 0.61:
        c = rng.choice(CODE)
        a = rng.randrange(len(c))
        return c[a:a + rng.randint(8, 48)]
    if kind < 0.69:
        return rng.choice(SPECIAL_LOOKALIKES)
    if kind < 0.77:
        return rng.choice(WHITESPACE)
    if kind < 0.83:
        return rng.choice(ODD)
    if kind < 0.91:
        return rng.choice(NORMALIZATION)
    return rng.choice(DIGITS)


def texts(rng, n):
    # Every fixed fragment alone first, so each case is also seen in isolation.
    fixed = SCRIPTS + EMOJI + CODE + SPECIAL_LOOKALIKES + WHITESPACE + ODD + NORMALIZATION + DIGITS
    out = list(fixed) + ["", " ", "\n"]
    while len(out) < n:
        parts = [fragment(rng) for _ in range(rng.randint(1, 4))]
        seps = ["", " ", " ", "\n", "\t", "  "]
        line = parts[0]
        for p in parts[1:]:
            line += rng.choice(seps) + p
        if rng.random() < 0.1:
            line = " " + line
        if rng.random() < 0.1:
            line += rng.choice(WHITESPACE)
        out.append(line)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "tests/fixtures/tokenizer/corpus.jsonl"))
    ap.add_argument("--lines", type=int, default=5200)
    args = ap.parse_args()
    rng = random.Random(20261130)
    lines = texts(rng, args.lines)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        for t in lines:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    print(f"{args.out}: {len(lines)} texts, {sum(len(t.encode()) for t in lines)} bytes of text")


if __name__ == "__main__":
    main()
