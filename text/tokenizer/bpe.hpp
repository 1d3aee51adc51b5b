#pragma once
// Byte-pair encoding of one pre-tokenized piece: start from its characters (or, with byte
// fallback, the <0xNN> tokens of characters outside the vocabulary) and merge the
// adjacent pair of lowest rank until none is left, leftmost first among equal ranks.
// HF files give the ranks as a merges list; SentencePiece models and llama GGUFs give
// piece scores instead, which become ranks here (a pair merges into a piece of the
// vocabulary, the higher the piece's score the sooner), so both run one algorithm.
// Results are cached per piece in a bounded, direct-mapped table.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace orzo {

class BpeModel {
 public:
  struct Options {
    bool byte_level = false;     // map piece bytes to GPT-2's byte characters before merging
    bool byte_fallback = false;  // unknown characters become <0xNN> tokens
    bool fuse_unk = false;       // consecutive unknown characters become one unk
    bool ignore_merges = false;  // a piece that is itself in the vocabulary is taken whole
    std::optional<int32_t> unk_id;
  };

  // `pieces[id]` is the vocabulary (empty strings for ids that are not model tokens);
  // `merges` are pairs of pieces, rank = position. Throws std::invalid_argument naming a
  // merge whose parts or result are not in the vocabulary.
  static BpeModel from_merges(std::vector<std::string> pieces,
                              const std::vector<std::pair<std::string, std::string>>& merges, Options options);

  // SentencePiece's rule: any two adjacent symbols whose concatenation is a mergeable
  // piece merge, highest score first. `mergeable[id]` marks normal pieces.
  static BpeModel from_scores(std::vector<std::string> pieces, const std::vector<float>& scores,
                              const std::vector<uint8_t>& mergeable, Options options);

  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;
  ~BpeModel();

  // Appends the ids of `piece` (valid UTF-8) to `out`.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  std::optional<int32_t> id_of(std::string_view piece) const;
  const std::vector<std::string>& pieces() const { return pieces_; }

 private:
  BpeModel(std::vector<std::string> pieces, Options options);
  void merge_symbols(std::string_view text, std::vector<int32_t>& out) const;

  struct Merge {
    uint32_t rank;
    int32_t result;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  std::vector<std::string> pieces_;
  std::unordered_map<std::string_view, int32_t> ids_;  // views into pieces_
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<int32_t> byte_ids_;  // <0xNN> per byte, -1 where absent
  Options options_;

  struct Cache;
  std::unique_ptr<Cache> cache_;
};

}  // namespace orzo
