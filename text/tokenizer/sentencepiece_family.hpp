#pragma once
// What the GGUF "llama" vocabularies and SentencePiece .model files share: a piece list
// with scores and types, turned into the same pipeline HF's LlamaConverter builds for
// such a model (Prepend('▁') + Replace(' ', '▁'), score-ranked BPE, byte fallback, the
// unknown/control/user-defined pieces as added tokens, BOS in front).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "text/tokenizer/tokenizer.hpp"

namespace orzo {

// SentencePiece's piece types (sentencepiece_model.proto), which GGUF token_type reuses.
enum class PieceType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct SentencePieceVocab {
  std::string source;
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;
  bool add_dummy_prefix = true;
  bool byte_fallback = false;
  std::optional<int32_t> unk_id, bos_id, eos_id;
  bool add_bos = true, add_eos = false;
};

TokenizerSpec sentencepiece_spec(SentencePieceVocab vocab);

}  // namespace orzo
