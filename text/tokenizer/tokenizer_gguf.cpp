// Tokenizer::from_gguf: llama.cpp's tokenizer.ggml.* metadata. "gpt2" vocabularies are
// byte-level BPE with merges and split rules named by tokenizer.ggml.pre (gguf_pre_type.hpp); "llama"
// vocabularies are SentencePiece BPE with scores. Either gives the same ids as the HF
// tokenizer the GGUF was converted from.
#include "core/load_error.hpp"
#include "formats/gguf.hpp"
#include "text/tokenizer/gguf_pre_type.hpp"
#include "text/tokenizer/sentencepiece_family.hpp"
#include "text/tokenizer/tokenizer.hpp"

namespace orzo {
namespace {

constexpr const char* kSource = "GGUF tokenizer.ggml";

std::optional<int32_t> optional_id(const GgufMetadata& meta, const std::string& key, size_t vocab) {
  const auto v = meta.find_int(key);
  // Converters write -1 (or 0xFFFFFFFF) for "none".
  if (!v || *v < 0 || static_cast<uint64_t>(*v) >= vocab) return std::nullopt;
  return static_cast<int32_t>(*v);
}

bool optional_bool(const GgufMetadata& meta, const std::string& key, bool fallback) {
  return meta.has(key) ? meta.get_bool(key) : fallback;
}

std::vector<int32_t> token_types(const GgufMetadata& meta, size_t n) {
  std::vector<int32_t> types(n, static_cast<int32_t>(PieceType::Normal));
  if (!meta.has("tokenizer.ggml.token_type")) return types;
  const auto stored = meta.get_int_array("tokenizer.ggml.token_type");
  if (stored.size() != n)
    throw LoadError(std::string(kSource) + ".token_type has " + std::to_string(stored.size()) + " entries for " +
                    std::to_string(n) + " tokens");
  for (size_t i = 0; i < n; ++i) types[i] = static_cast<int32_t>(stored[i]);
  return types;
}

TokenizerSpec byte_level_spec(const GgufMetadata& meta, std::vector<std::string> tokens) {
  const size_t n = tokens.size();
  TokenizerSpec spec;
  spec.source = kSource;
  // llama.cpp reads a missing name as "default".
  const std::string pre = meta.find_string("tokenizer.ggml.pre").value_or("default");
  std::optional<GgufPreType> rules = gguf_pre_type(pre);
  if (!rules) throw LoadError(std::string(kSource) + ".pre '" + pre + "' is not supported");
  spec.normalizer = std::move(rules->normalizer);
  spec.pre_tokenizer = std::move(rules->pre_tokenizer);
  const auto types = token_types(meta, n);
  for (size_t id = 0; id < n; ++id) {
    const auto type = static_cast<PieceType>(types[id]);
    if (type == PieceType::Control || type == PieceType::UserDefined || type == PieceType::Unknown) {
      AddedToken t;
      t.content = tokens[id];
      t.id = static_cast<int32_t>(id);
      t.special = type != PieceType::UserDefined;
      spec.added_tokens.push_back(std::move(t));
    }
  }
  std::vector<std::pair<std::string, std::string>> merges;
  for (const std::string& m : meta.get_string_array("tokenizer.ggml.merges")) {
    const size_t space = m.find(' ');
    if (space == std::string::npos) throw LoadError(std::string(kSource) + ".merges entry '" + m + "' has no space");
    merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }
  BpeModel::Options o;
  o.byte_level = true;
  o.ignore_merges = rules->ignore_merges;
  try {
    spec.model = std::make_unique<BpeModel>(BpeModel::from_merges(std::move(tokens), merges, o));
  } catch (const std::invalid_argument& e) {
    throw LoadError(std::string(kSource) + ".merges: " + e.what());
  }
  spec.decoding = TokenDecoding::ByteLevel;
  spec.bos_id = optional_id(meta, "tokenizer.ggml.bos_token_id", n);
  spec.eos_id = optional_id(meta, "tokenizer.ggml.eos_token_id", n);
  if (optional_bool(meta, "tokenizer.ggml.add_bos_token", false) && spec.bos_id) spec.prefix_ids.push_back(*spec.bos_id);
  if (optional_bool(meta, "tokenizer.ggml.add_eos_token", false) && spec.eos_id) spec.suffix_ids.push_back(*spec.eos_id);
  return spec;
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufMetadata& meta) {
  const std::string model = meta.find_string("tokenizer.ggml.model").value_or("");
  if (model.empty()) throw LoadError(std::string(kSource) + ".model is missing: the file has no tokenizer");
  std::vector<std::string> tokens = meta.get_string_array("tokenizer.ggml.tokens");
  const size_t n = tokens.size();
  TokenizerSpec spec;
  if (model == "gpt2") {
    spec = byte_level_spec(meta, std::move(tokens));
  } else if (model == "llama") {
    SentencePieceVocab v;
    v.source = kSource;
    v.types = token_types(meta, n);
    if (meta.has("tokenizer.ggml.scores")) {
      for (double s : meta.get_float_array("tokenizer.ggml.scores")) v.scores.push_back(static_cast<float>(s));
    } else {
      v.scores.assign(n, 0.0f);
    }
    v.pieces = std::move(tokens);
    for (int32_t t : v.types) v.byte_fallback = v.byte_fallback || t == static_cast<int32_t>(PieceType::Byte);
    v.add_dummy_prefix = optional_bool(meta, "tokenizer.ggml.add_space_prefix", true);
    v.unk_id = optional_id(meta, "tokenizer.ggml.unknown_token_id", n);
    v.bos_id = optional_id(meta, "tokenizer.ggml.bos_token_id", n);
    v.eos_id = optional_id(meta, "tokenizer.ggml.eos_token_id", n);
    v.add_bos = optional_bool(meta, "tokenizer.ggml.add_bos_token", true);
    v.add_eos = optional_bool(meta, "tokenizer.ggml.add_eos_token", false);
    spec = sentencepiece_spec(std::move(v));
  } else {
    throw LoadError(std::string(kSource) + ".model '" + model + "' is not supported");
  }
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (auto id = optional_id(meta, key, n)) spec.end_of_turn_ids.push_back(*id);
  spec.chat_template = meta.find_string("tokenizer.chat_template").value_or("");
  return Tokenizer(std::move(spec));
}

}  // namespace orzo
