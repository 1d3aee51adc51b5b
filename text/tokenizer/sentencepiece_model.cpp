// Tokenizer::from_sentencepiece_model: a SentencePiece ModelProto (.model) read with a
// small protobuf wire-format reader, as only a handful of its fields matter. The result
// is what transformers' LlamaConverter makes of the file (see sentencepiece_family.hpp);
// model types and normalizer settings that converter would not reproduce are refused.
#include <cstring>
#include <string_view>

#include "core/load_error.hpp"
#include "core/read_file.hpp"
#include "text/tokenizer/sentencepiece_family.hpp"
#include "text/tokenizer/tokenizer.hpp"

namespace orzo {
namespace {

class WireReader {
 public:
  WireReader(std::string_view bytes, const std::string& source) : data_(bytes), source_(source) {}

  bool done() const { return pos_ >= data_.size(); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) fail("truncated varint");
      const auto b = static_cast<unsigned char>(data_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    fail("varint longer than 10 bytes");
  }

  // Reads a field key; returns the field number and sets the wire type.
  uint32_t key(uint32_t& wire_type) {
    const uint64_t k = varint();
    wire_type = static_cast<uint32_t>(k & 7);
    if ((k >> 3) == 0 || (k >> 3) > 0x1FFFFFFF) fail("invalid field number");
    return static_cast<uint32_t>(k >> 3);
  }

  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > data_.size() - pos_) fail("length-delimited field runs past the end");
    const std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  float fixed32_float() {
    if (data_.size() - pos_ < 4) fail("truncated fixed32");
    uint32_t bits = 0;
    for (int k = 3; k >= 0; --k) bits = (bits << 8) | static_cast<unsigned char>(data_[pos_ + static_cast<size_t>(k)]);
    pos_ += 4;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }

  void skip(uint32_t wire_type) {
    switch (wire_type) {
      case 0: varint(); break;
      case 1: advance(8); break;
      case 2: bytes(); break;
      case 5: advance(4); break;
      default: fail("unsupported wire type " + std::to_string(wire_type));
    }
  }

  // A varint field that protobuf stores as int32 (negative values are 10-byte varints).
  int64_t int_value(uint32_t wire_type) {
    expect(wire_type, 0);
    return static_cast<int64_t>(varint());
  }

  void expect(uint32_t wire_type, uint32_t wanted) {
    if (wire_type != wanted) fail("field has wire type " + std::to_string(wire_type) + ", expected " + std::to_string(wanted));
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw LoadError(source_ + ": malformed SentencePiece model: " + what);
  }

 private:
  void advance(size_t n) {
    if (data_.size() - pos_ < n) fail("truncated field");
    pos_ += n;
  }
  std::string_view data_;
  size_t pos_ = 0;
  const std::string& source_;
};

const char* model_type_name(int64_t t) {
  switch (t) {
    case 1: return "UNIGRAM";
    case 2: return "BPE";
    case 3: return "WORD";
    case 4: return "CHAR";
    default: return "unknown";
  }
}

struct ParsedModel {
  SentencePieceVocab vocab;
  int64_t model_type = 1;  // proto default: UNIGRAM
  bool treat_whitespace_as_suffix = false;
  bool escape_whitespaces = true;
  std::string normalizer_name;
  bool has_charsmap = false;
};

void read_piece(std::string_view bytes, const std::string& source, ParsedModel& m) {
  WireReader r(bytes, source);
  std::string piece;
  float score = 0.0f;
  int64_t type = 1;  // NORMAL
  while (!r.done()) {
    uint32_t wt = 0;
    switch (r.key(wt)) {
      case 1: r.expect(wt, 2); piece = std::string(r.bytes()); break;
      case 2: r.expect(wt, 5); score = r.fixed32_float(); break;
      case 3: type = r.int_value(wt); break;
      default: r.skip(wt);
    }
  }
  if (type < 1 || type > 6) r.fail("piece '" + piece + "' has unknown type " + std::to_string(type));
  m.vocab.pieces.push_back(std::move(piece));
  m.vocab.scores.push_back(score);
  m.vocab.types.push_back(static_cast<int32_t>(type));
}

void read_trainer_spec(std::string_view bytes, const std::string& source, ParsedModel& m) {
  WireReader r(bytes, source);
  auto id = [](int64_t v) -> std::optional<int32_t> {
    if (v < 0 || v > (int64_t{1} << 30)) return std::nullopt;
    return static_cast<int32_t>(v);
  };
  while (!r.done()) {
    uint32_t wt = 0;
    switch (r.key(wt)) {
      case 3: m.model_type = r.int_value(wt); break;
      case 24: m.treat_whitespace_as_suffix = r.int_value(wt) != 0; break;
      case 35: m.vocab.byte_fallback = r.int_value(wt) != 0; break;
      case 40: m.vocab.unk_id = id(r.int_value(wt)); break;
      case 41: m.vocab.bos_id = id(r.int_value(wt)); break;
      case 42: m.vocab.eos_id = id(r.int_value(wt)); break;
      default: r.skip(wt);
    }
  }
}

void read_normalizer_spec(std::string_view bytes, const std::string& source, ParsedModel& m) {
  WireReader r(bytes, source);
  while (!r.done()) {
    uint32_t wt = 0;
    switch (r.key(wt)) {
      case 1: r.expect(wt, 2); m.normalizer_name = std::string(r.bytes()); break;
      case 2: r.expect(wt, 2); m.has_charsmap = !r.bytes().empty(); break;
      case 3: m.vocab.add_dummy_prefix = r.int_value(wt) != 0; break;
      case 5: m.escape_whitespaces = r.int_value(wt) != 0; break;
      default: r.skip(wt);
    }
  }
}

}  // namespace

Tokenizer Tokenizer::from_sentencepiece_model(const std::string& path) {
  return from_sentencepiece_model_bytes(read_file(path), path);
}

Tokenizer Tokenizer::from_sentencepiece_model_bytes(std::string_view data, const std::string& path) {
  ParsedModel m;
  m.vocab.source = path;
  m.vocab.unk_id = 0;  // the proto's defaults
  m.vocab.bos_id = 1;
  m.vocab.eos_id = 2;
  WireReader r(data, path);
  while (!r.done()) {
    uint32_t wt = 0;
    const uint32_t field = r.key(wt);
    if (wt != 2 || field > 3) {
      r.skip(wt);
      continue;
    }
    const std::string_view sub = r.bytes();
    if (field == 1) read_piece(sub, path, m);
    if (field == 2) read_trainer_spec(sub, path, m);
    if (field == 3) read_normalizer_spec(sub, path, m);
  }
  if (m.vocab.pieces.empty()) throw LoadError(path + ": SentencePiece model has no pieces");
  if (m.model_type != 2)
    throw LoadError(path + ": SentencePiece model_type " + model_type_name(m.model_type) + " is not supported (only BPE)");
  if (m.treat_whitespace_as_suffix) throw LoadError(path + ": SentencePiece treat_whitespace_as_suffix is not supported");
  if (!m.escape_whitespaces) throw LoadError(path + ": SentencePiece escape_whitespaces=false is not supported");
  if (m.has_charsmap || (!m.normalizer_name.empty() && m.normalizer_name != "identity"))
    throw LoadError(path + ": SentencePiece normalizer '" + m.normalizer_name + "' is not supported (only identity)");
  const size_t n = m.vocab.pieces.size();
  for (auto* id : {&m.vocab.unk_id, &m.vocab.bos_id, &m.vocab.eos_id})
    if (*id && static_cast<size_t>(**id) >= n) *id = std::nullopt;
  return Tokenizer(sentencepiece_spec(std::move(m.vocab)));
}

}  // namespace orzo
