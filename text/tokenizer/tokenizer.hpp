#pragma once
// Text to token ids and back, matching Hugging Face `tokenizers` id for id. One pipeline
// serves every supported family (byte-level BPE: GPT-2, Llama 3, Qwen2/3; SentencePiece
// BPE with byte fallback: Llama 2, Phi-3, Mistral, TinyStories): added tokens are cut
// out of the raw text, the rest is normalized, pre-tokenized and BPE-encoded, and the
// post-processor's BOS/EOS go around it. The loaders (HF tokenizer.json, GPT-2
// vocab/merges, GGUF metadata, SentencePiece .model) each describe their file in these
// terms and refuse, with a LoadError naming the part, anything they cannot reproduce.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/decode_table.hpp"
#include "text/tokenizer/added_tokens.hpp"
#include "text/tokenizer/bpe.hpp"
#include "text/tokenizer/normalizer.hpp"
#include "text/tokenizer/pretokenizer.hpp"

namespace orzo {

class GgufMetadata;

// How token strings turn back into bytes, i.e. the family's decoder chain.
enum class TokenDecoding {
  Raw,            // the token's text as it is
  ByteLevel,      // GPT-2 byte characters back to bytes
  SentencePiece,  // '▁' to ' ' (and <0xNN> to its byte with decode_byte_fallback)
};

// Everything a loader determines; Tokenizer checks it and builds the rest.
struct TokenizerSpec {
  std::string source;  // file named in error messages
  std::unique_ptr<BpeModel> model;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::vector<AddedToken> added_tokens;
  std::vector<int32_t> prefix_ids, suffix_ids;  // added around the text with add_special_tokens
  TokenDecoding decoding = TokenDecoding::Raw;
  bool decode_byte_fallback = false;  // HF's ByteFallback decoder
  bool strip_leading_space = false;
  std::optional<int32_t> bos_id, eos_id;
  std::vector<int32_t> end_of_turn_ids;  // besides eos
  std::string chat_template;
};

class Tokenizer {
 public:
  static Tokenizer from_hf_json(const std::string& tokenizer_json_path, const std::string& tokenizer_config_path = "");
  // The same from the files' contents (tokenizer_config_json empty: none); `source` names
  // them in errors.
  static Tokenizer from_hf_json_text(const std::string& tokenizer_json, const std::string& tokenizer_config_json = "",
                                     const std::string& source = "tokenizer.json");
  // tokenizer.json, with tokenizer_config.json, generation_config.json and
  // chat_template.jinja where present.
  static Tokenizer from_hf_dir(const std::string& dir);
  static Tokenizer from_gguf(const GgufMetadata& meta);
  static Tokenizer from_sentencepiece_model(const std::string& path);
  static Tokenizer from_sentencepiece_model_bytes(std::string_view bytes, const std::string& source);
  static Tokenizer from_gpt2_files(const std::string& vocab_json, const std::string& merges_txt);
  // A HF model directory (tokenizer.json, tokenizer.model or vocab.json + merges.txt) or a
  // .gguf file, as Model::load takes them.
  static Tokenizer for_model(const std::string& model_path);

  explicit Tokenizer(TokenizerSpec spec);

  // Invalid UTF-8 in `text` is first replaced by U+FFFD per maximal invalid subsequence.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = true) const;

  const DecodeTable& decode_table() const { return table_; }
  int32_t vocab_size() const { return static_cast<int32_t>(table_.bytes.size()); }
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<int32_t> bos_id() const { return spec_.bos_id; }
  std::optional<int32_t> eos_id() const { return spec_.eos_id; }
  std::vector<int32_t> eos_ids() const;
  const std::string& chat_template() const { return spec_.chat_template; }
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

 private:
  struct Workspace;
  void encode_text(std::string_view text, bool at_input_start, Workspace& ws, std::vector<int32_t>& out) const;
  std::string token_text(int32_t id) const;

  TokenizerSpec spec_;
  AddedTokens added_;
  std::unordered_map<int32_t, size_t> added_by_id_;  // index into spec_.added_tokens
  std::unordered_map<std::string, int32_t> added_by_content_;
  DecodeTable table_;
  std::string bos_token_, eos_token_;
};

}  // namespace orzo
