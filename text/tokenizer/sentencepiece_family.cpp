#include "text/tokenizer/sentencepiece_family.hpp"

#include "core/load_error.hpp"

namespace orzo {

TokenizerSpec sentencepiece_spec(SentencePieceVocab v) {
  TokenizerSpec spec;
  spec.source = v.source;
  const size_t n = v.pieces.size();
  if (v.scores.size() != n || v.types.size() != n)
    throw LoadError(v.source + ": " + std::to_string(n) + " pieces but " + std::to_string(v.scores.size()) +
                    " scores and " + std::to_string(v.types.size()) + " types");
  auto check = [&](const std::optional<int32_t>& id, const char* what) {
    if (id && (*id < 0 || static_cast<size_t>(*id) >= n))
      throw LoadError(v.source + ": " + what + " id " + std::to_string(*id) + " is outside the vocabulary");
  };
  check(v.unk_id, "unk");
  check(v.bos_id, "bos");
  check(v.eos_id, "eos");

  std::vector<uint8_t> mergeable(n, 0);
  for (size_t id = 0; id < n; ++id) {
    const auto type = static_cast<PieceType>(v.types[id]);
    mergeable[id] = type == PieceType::Normal;
    if (type == PieceType::Unknown || type == PieceType::Control || type == PieceType::UserDefined) {
      AddedToken t;
      t.content = v.pieces[id];
      t.id = static_cast<int32_t>(id);
      t.special = type != PieceType::UserDefined;
      spec.added_tokens.push_back(std::move(t));
    }
  }
  if (v.add_dummy_prefix) spec.normalizer.add_prepend("\xE2\x96\x81");
  spec.normalizer.add_replace(" ", "\xE2\x96\x81");
  BpeModel::Options o;
  o.byte_fallback = v.byte_fallback;
  o.fuse_unk = true;
  o.unk_id = v.unk_id;
  spec.model = std::make_unique<BpeModel>(BpeModel::from_scores(std::move(v.pieces), v.scores, mergeable, o));
  spec.decoding = TokenDecoding::SentencePiece;
  spec.decode_byte_fallback = true;
  spec.strip_leading_space = v.add_dummy_prefix;
  spec.bos_id = v.bos_id;
  spec.eos_id = v.eos_id;
  if (v.add_bos && v.bos_id) spec.prefix_ids.push_back(*v.bos_id);
  if (v.add_eos && v.eos_id) spec.suffix_ids.push_back(*v.eos_id);
  return spec;
}

}  // namespace orzo
