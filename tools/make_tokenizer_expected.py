#!/usr/bin/env python3
"""Writes the reference token ids for tests/fixtures/tokenizer/corpus.jsonl, one file per
tokenizer family under tests/fixtures/tokenizer/expected/: line i holds the ids of corpus
text i (space-separated), encoded by HF `tokenizers` with add_special_tokens=False.

Families and references:
  qwen3        tokenizers/qwen3/tokenizer.json                       (Tokenizer.from_file)
  phi-3        tokenizers/phi-3/tokenizer.json                       (Tokenizer.from_file)
  stories260K  stories260K/hf/tokenizer.json                         (Tokenizer.from_file)
  gpt2         tokenizers/gpt2/vocab.json + merges.txt               (BPE + ByteLevel, as GPT2TokenizerFast)
  smollm2      smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf (tokenizer.ggml.pre = smollm): BPE over the
               GGUF's tokens and merges with SmolLM2's pre-tokenizer, Digits(individual_digits=True) then
               ByteLevel, and its control tokens as special added tokens
  mistral-v1   tokenizers/mistral-v1/tokenizer.model                 (transformers' LlamaConverter, legacy:
               score-ranked merges from convert_slow_tokenizer.generate_merges, Prepend('▁') + Replace(' ', '▁'),
               byte fallback, <unk>/<s>/</s> special). The sentencepiece library is run too and
               the lines where it disagrees are counted and listed (--show-spm-diffs).

expected/gguf-pre-splits.json holds, for each tokenizer.ggml.pre name orzo reads, the piece
end offsets of llama.cpp's split regexes for that name run as HF Splits, on a sample of the
corpus.

expected/llama3-splits.txt holds, per corpus text, the byte offsets where the pieces of the
Llama 3 split regex end (HF's Split pre-tokenizer): no Llama 3 vocabulary is available, so
its pre-tokenizer is checked on its own.

It also writes tests/fixtures/tokenizer/features.json: small tokenizers built here with
`tokenizers`, each exercising one option (Metaspace schemes and split, ByteLevel prefix
space, added-token lstrip/rstrip/single_word, unk and fuse_unk, ignore_merges, every Split
behavior with and without invert, Digits, Punctuation, Whitespace, WhitespaceSplit, template
BOS/EOS, the normalizers NFC, NFKC, Lowercase, Strip, Replace and Prepend), with HF's ids for
a few texts each.

Usage: tools/make_tokenizer_expected.py [--shared ../shared] [--show-spm-diffs] [--only NAME,...]
  --only: write just these outputs (features, llama3-splits, gguf-pre-splits, or family names).
"""
import argparse
import json
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors, trainers
from tokenizers.models import BPE

ROOT = Path(__file__).resolve().parent.parent


def gpt2(shared):
    d = shared / "models/tokenizers/gpt2"
    tok = Tokenizer(BPE.from_file(str(d / "vocab.json"), str(d / "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True)])
    return tok


def mistral(shared):
    from sentencepiece import sentencepiece_model_pb2 as pb
    from transformers.convert_slow_tokenizer import generate_merges

    proto = pb.ModelProto()
    proto.ParseFromString((shared / "models/tokenizers/mistral-v1/tokenizer.model").read_bytes())
    vocab = {p.piece: i for i, p in enumerate(proto.pieces)}
    # Merges ranked by the merged piece's score, as transformers 4.x's LlamaConverter passes
    # vocab_scores (5.x's extractor ranks by id, which is not SentencePiece's rule: scores of
    # this model's whitespace pieces are out of id order).
    scores = {p.piece: p.score for p in proto.pieces}
    merges = generate_merges(vocab, scores)
    tok = Tokenizer(BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.add_special_tokens([AddedToken(p.piece, special=True, normalized=False)
                            for p in proto.pieces if p.type in (2, 3)])
    return tok


def smollm2(shared):
    from gguf import GGUFReader

    r = GGUFReader(str(shared / "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"))

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    assert strings("tokenizer.ggml.pre") == ["smollm"]
    tokens = strings("tokenizer.ggml.tokens")
    f = r.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data]
    merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
    tok = Tokenizer(BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3])
    return tok


def spm_disagreements(shared, tok, texts, show):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=str(shared / "models/tokenizers/mistral-v1/tokenizer.model"))
    diff = 0
    for i, t in enumerate(texts):
        a, b = tok.encode(t, add_special_tokens=False).ids, sp.encode(t)
        if a != b:
            diff += 1
            if show:
                print(f"  line {i}: {t!r}\n    hf  {a}\n    spm {b}")
    print(f"mistral-v1: the sentencepiece library disagrees with the HF conversion on {diff}/{len(texts)} lines")


def feature_tokenizers():
    """Small tokenizers, one option each, and the texts that exercise it."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    spm_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "▁": 3}
    for c in letters + "ABCDEFGHIJKLMNOPQRSTUVWXYZ.,!?'0123456789<>|/":
        spm_vocab[c] = len(spm_vocab)
    spm_merges = [("▁", "t"), ("h", "e"), ("▁t", "he"), ("▁", "a"), ("i", "n"), ("▁", "in"), ("▁a", "n"), ("▁an", "d")]
    for a, b in spm_merges:
        spm_vocab[a + b] = len(spm_vocab)
    for b in range(256):
        spm_vocab[f"<0x{b:02X}>"] = len(spm_vocab)

    byte_chars = sorted(pre_tokenizers.ByteLevel.alphabet())
    bl_vocab = {c: i for i, c in enumerate(byte_chars)}
    bl_merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("Ġ", "a"), ("i", "n"), ("Ġa", "n"), ("Ġan", "d"), ("t", "he")]
    for a, b in bl_merges:
        bl_vocab[a + b] = len(bl_vocab)
    bl_vocab["<|end|>"] = len(bl_vocab)

    texts = ["the and in", " the  and", "a<x>b", "a <x> b", "in<x>in", "the<x>", "<x>the", "ünïcödé ok",
             "  leading", "trailing  ", "the\tand\nin", "thé ﬁ ① ＡＢ", "<|end|>the<|end|> and", "x<y>y y<y> y", ""]

    def spm(prepend_scheme=None, split=False, byte_fallback=True, unk=True, fuse=True, template=False,
            normalizer=None, legacy=False, extra_added=(), pre_before=None):
        vocab = dict(spm_vocab)
        if not byte_fallback:
            vocab = {k: v for k, v in vocab.items() if not k.startswith("<0x")}
        t = Tokenizer(BPE(vocab, spm_merges, unk_token="<unk>" if unk else None, fuse_unk=fuse,
                          byte_fallback=byte_fallback))
        if legacy:
            t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        elif normalizer is not None:
            t.normalizer = normalizer
        if prepend_scheme is not None:
            t.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=prepend_scheme, split=split)
            if pre_before is not None:
                t.pre_tokenizer = pre_tokenizers.Sequence([pre_before, t.pre_tokenizer])
            t.decoder = decoders.Metaspace(prepend_scheme=prepend_scheme, split=split)
        else:
            t.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                           decoders.Strip(" ", 1, 0)])
        t.add_special_tokens([AddedToken("<s>", special=True, normalized=False),
                              AddedToken("</s>", special=True, normalized=False)])
        t.add_tokens(list(extra_added))
        if template:
            t.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
        return t

    def byte_level(add_prefix_space=False, use_regex=True, extra_added=(), ignore_merges=False, split=None):
        t = Tokenizer(BPE(dict(bl_vocab), bl_merges, ignore_merges=ignore_merges))
        steps = []
        if split is not None:
            steps.append(split)
        steps.append(pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=use_regex))
        t.pre_tokenizer = pre_tokenizers.Sequence(steps) if len(steps) > 1 else steps[0]
        t.decoder = decoders.ByteLevel()
        t.add_special_tokens([AddedToken("<|end|>", special=True, normalized=False)])
        t.add_tokens(list(extra_added))
        return t

    # A byte-level vocabulary trained across spaces, digits and punctuation, so that where a
    # pre-tokenizer cuts shows in the ids.
    split_texts = ["a,,b;c, d", "x1234y 56 ½⅓ ①② Ⅻ", "Hello, World! (ok) -- yes?!", "foo_bar  baz\tqux\n\nend",
                   "a\u00a0b\u2003c\u200bd e\u0301 caf\u00e9", "ΣΑΣ İstanbul ÀÉÎ ǅ ß", "  padded  ", "\t lead and trail \n",
                   "xxabxx", "don't  stop", "ﬁ ＡＢ ①", "¿Qué? «sí» — 「はい」"]
    trainer = trainers.BpeTrainer(vocab_size=500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|end|>"], show_progress=False)
    base = Tokenizer(BPE())
    base.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    base.train_from_iterator((split_texts + texts) * 3, trainer)
    trained = json.loads(base.to_str())["model"]
    trained_merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in trained["merges"]]
    split_texts = split_texts + texts

    def cut_by(pre=None, normalizer=None):
        """The trained vocabulary behind `pre` (then ByteLevel without its regex), under `normalizer`."""
        t = Tokenizer(BPE(dict(trained["vocab"]), trained_merges))
        steps = ([pre] if pre is not None else []) + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        t.pre_tokenizer = pre_tokenizers.Sequence(steps)
        if normalizer is not None:
            t.normalizer = normalizer
        t.decoder = decoders.ByteLevel()
        t.add_special_tokens([AddedToken("<|end|>", special=True, normalized=False)])
        return t, split_texts

    behaviors = ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]
    cuts = {}
    for b in behaviors:
        cuts[f"split_{b}"] = cut_by(pre_tokenizers.Split(Regex(r"[,;!? ]"), b))
        cuts[f"split_{b}_invert"] = cut_by(pre_tokenizers.Split(Regex(r"\p{L}+"), b, invert=True))
        cuts[f"punctuation_{b}"] = cut_by(pre_tokenizers.Punctuation(b))
    cuts["split_string_merged_with_next"] = cut_by(pre_tokenizers.Split("  ", "merged_with_next"))
    cuts["split_empty_matches"] = cut_by(pre_tokenizers.Split(Regex("x*"), "merged_with_previous"))
    cuts["digits_individual"] = cut_by(pre_tokenizers.Digits(individual_digits=True))
    cuts["digits_contiguous"] = cut_by(pre_tokenizers.Digits(individual_digits=False))
    cuts["whitespace"] = cut_by(pre_tokenizers.Whitespace())
    cuts["whitespace_split"] = cut_by(pre_tokenizers.WhitespaceSplit())
    cuts["sequence_digits_punctuation_whitespace"] = cut_by(pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.Punctuation()]))
    cuts["normalizer_nfc"] = cut_by(normalizer=normalizers.NFC())
    cuts["normalizer_lowercase"] = cut_by(normalizer=normalizers.Lowercase())
    cuts["normalizer_strip"] = cut_by(normalizer=normalizers.Strip())
    cuts["normalizer_strip_left"] = cut_by(normalizer=normalizers.Strip(left=True, right=False))
    cuts["normalizer_strip_right"] = cut_by(normalizer=normalizers.Strip(left=False, right=True))
    cuts["normalizer_replace_regex"] = cut_by(normalizer=normalizers.Replace(Regex(r"\s{2,}"), " "))
    # (A Replace whose regex matches the empty string makes tokenizers 0.23.3 panic, so it has no reference.)
    cuts["normalizer_sequence"] = cut_by(pre_tokenizers.Whitespace(), normalizers.Sequence(
        [normalizers.NFKC(), normalizers.Lowercase(), normalizers.Strip(), normalizers.Replace("a", "aa"),
         normalizers.Prepend("^")]))

    x = lambda **kw: AddedToken("<x>", special=False, normalized=False, **kw)
    y = lambda **kw: AddedToken("<y>", special=True, normalized=False, **kw)
    return {
        "spm_legacy": (spm(legacy=True), texts),
        "spm_legacy_template": (spm(legacy=True, template=True), texts),
        "spm_no_byte_fallback_fuse_unk": (spm(legacy=True, byte_fallback=False), texts),
        "spm_no_byte_fallback_no_fuse": (spm(legacy=True, byte_fallback=False, fuse=False), texts),
        "spm_no_unk": (spm(legacy=True, byte_fallback=False, unk=False), texts),
        "metaspace_always": (spm(prepend_scheme="always"), texts),
        "metaspace_first": (spm(prepend_scheme="first", extra_added=[x()]), texts),
        "metaspace_first_split": (spm(prepend_scheme="first", split=True, extra_added=[x()]), texts),
        "metaspace_never_split": (spm(prepend_scheme="never", split=True), texts),
        "metaspace_always_no_split": (spm(prepend_scheme="always", split=False), texts),
        "metaspace_never": (spm(prepend_scheme="never", split=False), texts),
        "metaspace_first_after_removed_split": (spm(prepend_scheme="first", split=True, pre_before=pre_tokenizers.Split(
            " ", "removed")), texts),
        "metaspace_after_digits": (spm(prepend_scheme="first", split=True, pre_before=pre_tokenizers.Digits(True)),
                                   texts + ["12 ab3", " 4"]),
        "nfkc_legacy": (spm(normalizer=normalizers.Sequence([normalizers.NFKC(), normalizers.Prepend("▁"),
                                                              normalizers.Replace(" ", "▁")])), texts),
        "added_lstrip": (spm(legacy=True, extra_added=[x(lstrip=True)]), texts),
        "added_rstrip": (spm(legacy=True, extra_added=[x(rstrip=True)]), texts),
        "added_single_word": (byte_level(extra_added=[x(single_word=True), y(single_word=True)]), texts),
        "byte_level": (byte_level(), texts),
        "byte_level_prefix_space": (byte_level(add_prefix_space=True, extra_added=[x()]), texts),
        "byte_level_no_regex": (byte_level(use_regex=False), texts),
        "byte_level_ignore_merges": (byte_level(ignore_merges=True), texts),
        "split_removed_then_byte_level": (byte_level(use_regex=False, split=pre_tokenizers.Split(" ", "removed")), texts),
        "split_isolated_regex_prefix": (byte_level(add_prefix_space=True, use_regex=False,
                                                   split=pre_tokenizers.Split(Regex(r"\p{L}+"), "isolated")), texts),
        **cuts,
    }


def write_features(fixtures):
    out = []
    for name, (tok, texts) in feature_tokenizers().items():
        cases = []
        for t in texts:
            for special in (False, True):
                ids = tok.encode(t, add_special_tokens=special).ids
                cases.append({"text": t, "add_special_tokens": special, "ids": ids,
                              "decoded": tok.decode(ids, skip_special_tokens=False),
                              "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
        out.append({"name": name, "tokenizer": json.loads(tok.to_str()), "cases": cases})
    (fixtures / "features.json").write_text(json.dumps(out, ensure_ascii=False, indent=None) + "\n", encoding="utf-8")
    print(f"features.json: {len(out)} tokenizers")


LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")


# The split regexes llama.cpp runs for each tokenizer.ggml.pre name, each as an HF Split
# (Isolated) in order, in the forms the families' tokenizer.json files write them.
GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
DEEPSEEK_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
DEEPSEEK_LETTERS = (
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373"
    "\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f"
    "\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
    "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d"
    "\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4"
    "\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
    "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d"
    "\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a"
    "\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2"
    "\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+")
TEKKEN_SPLIT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
                r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GGUF_PRE_TYPES = {  # name: (NFC first, the regexes)
    "default": (False, [r"[\p{P}\$\+<=>\^~\|]+", GPT2_SPLIT, r"\p{N}+", "[0-9][0-9][0-9]"]),
    "gpt-2": (False, [GPT2_SPLIT]), "phi-2": (False, [GPT2_SPLIT]), "olmo": (False, [GPT2_SPLIT]),
    "llama-bpe": (False, [None]), "llama3": (False, [None]),  # None: LLAMA3_SPLIT, defined below
    "qwen2": (True, [QWEN2_SPLIT]), "deepseek-r1-qwen": (True, [QWEN2_SPLIT]),
    "smollm": (False, [r"\p{N}", GPT2_SPLIT]), "starcoder": (False, [r"\p{N}", GPT2_SPLIT]),
    "command-r": (True, [r"\p{N}", GPT2_SPLIT]),
    "deepseek-llm": (False, ["[\r\n]", DEEPSEEK_LETTERS, "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
                             r"\s+$", DEEPSEEK_CJK, r"\p{N}+"]),
    "deepseek-coder": (False, ["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", DEEPSEEK_CJK, r"\p{N}"]),
    "tekken": (False, [TEKKEN_SPLIT]),
}


def write_gguf_pre_splits(fixtures, texts):
    """expected/gguf-pre-splits.json: per pre type, the piece end offsets (bytes of the text after
    the type's normalizer) of every 13th corpus text and a few chosen ones."""
    sample = texts[::13] + ["Straße ΣΑΣ ǅemal McDonald's HTTPServer iPhone", "x1234 5½ ①②", "def f(x):\n\treturn x**2  \n",
                            "中文 한국어 日本語テキスト ｆｕｌｌ！", "e\u0301 Å\u030a ﬁ", "trailing   "]
    out = {"texts": sample, "splits": {}}
    for name, (nfc, regexes) in GGUF_PRE_TYPES.items():
        pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r or LLAMA3_SPLIT), "isolated") for r in regexes])
        rows = []
        for t in sample:
            n = normalizers.NFC().normalize_str(t) if nfc else t
            rows.append([len(n[:end].encode()) for _, (_, end) in pre.pre_tokenize_str(n)])
        out["splits"][name] = rows
    (fixtures / "expected" / "gguf-pre-splits.json").write_text(json.dumps(out, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"gguf-pre-splits: {len(GGUF_PRE_TYPES)} pre types, {len(sample)} texts")


def write_llama3_splits(fixtures, texts):
    split = pre_tokenizers.Split(Regex(LLAMA3_SPLIT), "isolated")
    with open(fixtures / "expected" / "llama3-splits.txt", "w", newline="\n") as f:
        for t in texts:
            ends = [len(t[:end].encode()) for _, (_, end) in split.pre_tokenize_str(t)]
            f.write(" ".join(map(str, ends)) + "\n")
    print(f"llama3-splits: {len(texts)} lines")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"))
    ap.add_argument("--show-spm-diffs", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated: features, llama3-splits, or family names")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    wanted = lambda name: not only or name in only
    shared = Path(args.shared)
    fixtures = ROOT / "tests/fixtures/tokenizer"
    texts = [json.loads(line) for line in (fixtures / "corpus.jsonl").read_text(encoding="utf-8").split("\n") if line]
    families = {
        "qwen3": lambda: Tokenizer.from_file(str(shared / "models/tokenizers/qwen3/tokenizer.json")),
        "phi-3": lambda: Tokenizer.from_file(str(shared / "models/tokenizers/phi-3/tokenizer.json")),
        "stories260K": lambda: Tokenizer.from_file(str(shared / "models/stories260K/hf/tokenizer.json")),
        "gpt2": lambda: gpt2(shared),
        "smollm2": lambda: smollm2(shared),
        "mistral-v1": lambda: mistral(shared),
    }
    if wanted("features"):
        write_features(fixtures)
    (fixtures / "expected").mkdir(exist_ok=True)
    if wanted("llama3-splits"):
        write_llama3_splits(fixtures, texts)
    if wanted("gguf-pre-splits"):
        write_gguf_pre_splits(fixtures, texts)
    for name, make in families.items():
        if not wanted(name):
            continue
        tok = make()
        with open(fixtures / "expected" / f"{name}.txt", "w", newline="\n") as f:
            for t in texts:
                f.write(" ".join(map(str, tok.encode(t, add_special_tokens=False).ids)) + "\n")
        print(f"{name}: {len(texts)} lines")
        if name == "mistral-v1":
            spm_disagreements(shared, tok, texts, args.show_spm_diffs)


if __name__ == "__main__":
    main()
