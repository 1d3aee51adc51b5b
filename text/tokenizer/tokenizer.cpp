#include "text/tokenizer/tokenizer.hpp"

#include <sys/stat.h>

#include <algorithm>

#include "core/load_error.hpp"
#include "formats/gguf.hpp"
#include "text/tokenizer/byte_level.hpp"
#include "text/tokenizer/unicode.hpp"

namespace orzo {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string decode_sentencepiece_piece(const std::string& piece, bool byte_fallback) {
  // Byte pieces are spelled exactly <0xNN>, upper-case hex.
  if (byte_fallback && piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>') {
    const int hi = hex_digit(piece[3]), lo = hex_digit(piece[4]);
    if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
  }
  std::string out;
  for (size_t pos = 0;;) {
    const size_t hit = piece.find("\xE2\x96\x81", pos);
    out.append(piece, pos, hit == std::string::npos ? std::string::npos : hit - pos);
    if (hit == std::string::npos) break;
    out += ' ';
    pos = hit + 3;
  }
  return out;
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

Tokenizer::Tokenizer(TokenizerSpec spec) : spec_(std::move(spec)) {
  if (!spec_.model) throw LoadError(spec_.source + ": no tokenizer model");
  int32_t size = static_cast<int32_t>(spec_.model->pieces().size());
  // Added tokens follow the vocabulary; the slack bounds the table a hostile file can ask for.
  const int64_t max_id = static_cast<int64_t>(size) + static_cast<int64_t>(spec_.added_tokens.size()) + 65536;
  for (const AddedToken& t : spec_.added_tokens) {
    if (t.id < 0 || t.id > max_id) throw LoadError(spec_.source + ": added token id " + std::to_string(t.id) + " is out of range");
    if (t.normalized && !spec_.normalizer.only_unicode_forms() && !spec_.normalizer.empty())
      throw LoadError(spec_.source + ": added token '" + t.content +
                      "' with normalized=true under a normalizer that rewrites text is not supported");
    size = std::max(size, t.id + 1);
  }
  // Later entries shadow earlier ones with the same id or content, as in HF.
  for (size_t k = 0; k < spec_.added_tokens.size(); ++k) {
    added_by_id_[spec_.added_tokens[k].id] = k;
    added_by_content_[spec_.added_tokens[k].content] = spec_.added_tokens[k].id;
  }
  added_ = AddedTokens(spec_.added_tokens);
  auto check_id = [&](const std::optional<int32_t>& id, const char* what) {
    if (id && (*id < 0 || *id >= size))
      throw LoadError(spec_.source + ": " + what + " id " + std::to_string(*id) + " is outside the vocabulary");
  };
  check_id(spec_.bos_id, "bos");
  check_id(spec_.eos_id, "eos");
  for (int32_t id : spec_.prefix_ids) check_id(id, "post-processor token");
  for (int32_t id : spec_.suffix_ids) check_id(id, "post-processor token");
  for (int32_t id : spec_.end_of_turn_ids) check_id(id, "end-of-turn");

  table_.bytes.resize(static_cast<size_t>(size));
  table_.special.assign(static_cast<size_t>(size), 0);
  table_.strip_leading_space = spec_.strip_leading_space;
  for (int32_t id = 0; id < size; ++id) {
    const std::string text = token_text(id);
    std::string& bytes = table_.bytes[static_cast<size_t>(id)];
    switch (spec_.decoding) {
      case TokenDecoding::Raw: bytes = text; break;
      case TokenDecoding::ByteLevel: {
        // HF falls back to the token's own UTF-8 when a character has no byte behind it.
        auto mapped = bytes_of_byte_level(text);
        bytes = mapped ? std::move(*mapped) : text;
        break;
      }
      case TokenDecoding::SentencePiece: bytes = decode_sentencepiece_piece(text, spec_.decode_byte_fallback); break;
    }
  }
  for (const auto& [id, k] : added_by_id_) table_.special[static_cast<size_t>(id)] = spec_.added_tokens[k].special;
  if (spec_.bos_id) bos_token_ = token_text(*spec_.bos_id);
  if (spec_.eos_id) eos_token_ = token_text(*spec_.eos_id);
}

std::string Tokenizer::token_text(int32_t id) const {
  // Added tokens take precedence, as in HF, where they shadow the model's vocabulary.
  if (auto it = added_by_id_.find(id); it != added_by_id_.end()) return spec_.added_tokens[it->second].content;
  const auto& pieces = spec_.model->pieces();
  return id >= 0 && static_cast<size_t>(id) < pieces.size() ? pieces[static_cast<size_t>(id)] : std::string();
}

// Buffers one encode call reuses for every stretch of text between added tokens.
struct Tokenizer::Workspace {
  std::string normalized;
  PreTokenizer::Scratch scratch;
};

void Tokenizer::encode_text(std::string_view text, bool at_input_start, Workspace& ws, std::vector<int32_t>& out) const {
  std::string_view view = text;
  if (!spec_.normalizer.empty()) {
    spec_.normalizer.apply(text, ws.normalized);
    view = ws.normalized;
  }
  if (spec_.pre_tokenizer.empty()) {
    spec_.model->encode_piece(view, out);
    return;
  }
  spec_.pre_tokenizer.run(view, at_input_start, ws.scratch);
  for (std::string_view piece : ws.scratch.pieces) spec_.model->encode_piece(piece, out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = repair_utf8(text);
    text = repaired;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special_tokens) out.insert(out.end(), spec_.prefix_ids.begin(), spec_.prefix_ids.end());
  Workspace ws;
  if (added_.empty()) {
    encode_text(text, true, ws, out);
  } else {
    std::vector<AddedTokens::Part> parts;
    added_.split(text, parts);
    for (const auto& p : parts) {
      if (p.id >= 0) {
        out.push_back(p.id);
      } else {
        encode_text(text.substr(p.begin, p.end - p.begin), p.begin == 0, ws, out);
      }
    }
  }
  if (add_special_tokens) out.insert(out.end(), spec_.suffix_ids.begin(), spec_.suffix_ids.end());
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  return orzo::decode(table_, ids.data(), ids.size(), skip_special_tokens);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = added_by_content_.find(std::string(token)); it != added_by_content_.end()) return it->second;
  return spec_.model->id_of(token);
}

std::vector<int32_t> Tokenizer::eos_ids() const {
  std::vector<int32_t> ids;
  if (spec_.eos_id) ids.push_back(*spec_.eos_id);
  for (int32_t id : spec_.end_of_turn_ids)
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  return ids;
}

Tokenizer Tokenizer::for_model(const std::string& model_path) {
  if (is_file(model_path)) {
    if (model_path.size() >= 5 && model_path.compare(model_path.size() - 5, 5, ".gguf") == 0)
      return from_gguf(read_gguf(model_path).metadata);
    if (model_path.size() >= 6 && model_path.compare(model_path.size() - 6, 6, ".model") == 0)
      return from_sentencepiece_model(model_path);
    throw LoadError(model_path + ": not a .gguf or SentencePiece .model file");
  }
  if (!is_dir(model_path)) throw LoadError(model_path + ": no such file or directory");
  if (is_file(model_path + "/tokenizer.json")) return from_hf_dir(model_path);
  if (is_file(model_path + "/tokenizer.model")) return from_sentencepiece_model(model_path + "/tokenizer.model");
  if (is_file(model_path + "/vocab.json") && is_file(model_path + "/merges.txt"))
    return from_gpt2_files(model_path + "/vocab.json", model_path + "/merges.txt");
  throw LoadError(model_path + ": no tokenizer.json, tokenizer.model or vocab.json + merges.txt");
}

}  // namespace orzo
