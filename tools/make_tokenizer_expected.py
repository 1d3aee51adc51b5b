#!/usr/bin/env python3
"""Writes the reference token ids for tests/fixtures/tokenizer/corpus.jsonl, one file per
tokenizer family under tests/fixtures/tokenizer/expected/: line i holds the ids of corpus
text i (space-separated), encoded by HF `tokenizers` with add_special_tokens=False.

Families and references:
  qwen3        tokenizers/qwen3/tokenizer.json                       (Tokenizer.from_file)
  phi-3        tokenizers/phi-3/tokenizer.json                       (Tokenizer.from_file)
  stories260K  stories260K/hf/tokenizer.json                         (Tokenizer.from_file)
  gpt2         tokenizers/gpt2/vocab.json + merges.txt               (BPE + ByteLevel, as GPT2TokenizerFast)
  mistral-v1   tokenizers/mistral-v1/tokenizer.model                 (transformers' LlamaConverter, legacy:
               score-ranked merges from convert_slow_tokenizer.generate_merges, Prepend('▁') + Replace(' ', '▁'),
               byte fallback, <unk>/<s>/</s> special). The sentencepiece library is run too and
               the lines where it disagrees are counted and listed (--show-spm-diffs).

expected/llama3-splits.txt holds, per corpus text, the byte offsets where the pieces of the
Llama 3 split regex end (HF's Split pre-tokenizer): no Llama 3 vocabulary is available, so
its pre-tokenizer is checked on its own.

It also writes tests/fixtures/tokenizer/features.json: small tokenizers built here with
`tokenizers`, each exercising one option (Metaspace schemes and split, ByteLevel prefix
space, added-token lstrip/rstrip/single_word, unk and fuse_unk, ignore_merges, Split
behaviors, template BOS/EOS, NFKC), with HF's ids for a few texts each.

Usage: tools/make_tokenizer_expected.py [--shared ../shared] [--show-spm-diffs]
"""
import argparse
import json
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
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
            normalizer=None, legacy=False, extra_added=()):
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
    args = ap.parse_args()
    shared = Path(args.shared)
    fixtures = ROOT / "tests/fixtures/tokenizer"
    texts = [json.loads(line) for line in (fixtures / "corpus.jsonl").read_text(encoding="utf-8").split("\n") if line]
    families = {
        "qwen3": lambda: Tokenizer.from_file(str(shared / "models/tokenizers/qwen3/tokenizer.json")),
        "phi-3": lambda: Tokenizer.from_file(str(shared / "models/tokenizers/phi-3/tokenizer.json")),
        "stories260K": lambda: Tokenizer.from_file(str(shared / "models/stories260K/hf/tokenizer.json")),
        "gpt2": lambda: gpt2(shared),
        "mistral-v1": lambda: mistral(shared),
    }
    write_features(fixtures)
    (fixtures / "expected").mkdir(exist_ok=True)
    write_llama3_splits(fixtures, texts)
    for name, make in families.items():
        tok = make()
        with open(fixtures / "expected" / f"{name}.txt", "w", newline="\n") as f:
            for t in texts:
                f.write(" ".join(map(str, tok.encode(t, add_special_tokens=False).ids)) + "\n")
        print(f"{name}: {len(texts)} lines")
        if name == "mistral-v1":
            spm_disagreements(shared, tok, texts, args.show_spm_diffs)


if __name__ == "__main__":
    main()
