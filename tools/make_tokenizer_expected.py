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

Usage: tools/make_tokenizer_expected.py [--shared ../shared] [--show-spm-diffs]
"""
import argparse
import json
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers
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
    (fixtures / "expected").mkdir(exist_ok=True)
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
