#pragma once
// What a byte-level GGUF vocabulary's tokenizer.ggml.pre stands for: the split regexes
// llama.cpp runs for that name (written as the family's HF tokenizer.json writes them where
// PCRE2 can take them as they are), and what else the family's HF tokenizer does around
// them (a normalizer, ignore_merges).
#include <optional>
#include <string>
#include <vector>

#include "text/tokenizer/normalizer.hpp"
#include "text/tokenizer/pretokenizer.hpp"

namespace orzo {

struct GgufPreType {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  bool ignore_merges = false;  // a piece that is itself in the vocabulary is taken whole
};

// Empty for a name this table does not know.
std::optional<GgufPreType> gguf_pre_type(const std::string& name);

// The names gguf_pre_type knows, for messages.
std::vector<std::string> gguf_pre_type_names();

}  // namespace orzo
