#include "text/tokenizer/bpe.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <mutex>
#include <queue>
#include <stdexcept>

#include "text/tokenizer/byte_level.hpp"
#include "text/tokenizer/unicode.hpp"

namespace orzo {

// Direct-mapped: a piece lives in the slot its hash picks, evicting whatever was there,
// which bounds memory without bookkeeping. Long pieces (SentencePiece families see whole
// words, some of them runs of text) are not cached: they rarely repeat.
struct BpeModel::Cache {
  static constexpr size_t kSlots = size_t{1} << 15;
  static constexpr size_t kLocks = 64;
  static constexpr size_t kMaxPieceBytes = 64;
  struct Slot {
    std::string key;
    std::vector<int32_t> ids;
    bool used = false;
  };
  std::vector<Slot> slots{kSlots};
  std::array<std::mutex, kLocks> locks;
};

BpeModel::BpeModel(std::vector<std::string> pieces, Options options)
    : pieces_(std::move(pieces)), options_(options), cache_(std::make_unique<Cache>()) {
  ids_.reserve(pieces_.size());
  for (size_t id = 0; id < pieces_.size(); ++id)
    if (!pieces_[id].empty()) ids_.emplace(pieces_[id], static_cast<int32_t>(id));
  byte_ids_.assign(256, -1);
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    if (auto id = id_of(name)) byte_ids_[static_cast<size_t>(b)] = *id;
  }
}

BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;
BpeModel::~BpeModel() = default;

BpeModel BpeModel::from_merges(std::vector<std::string> pieces,
                               const std::vector<std::pair<std::string, std::string>>& merges, Options options) {
  BpeModel m(std::move(pieces), options);
  m.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const auto ia = m.id_of(a), ib = m.id_of(b), ir = m.id_of(a + b);
    if (!ia || !ib || !ir)
      throw std::invalid_argument("merge '" + a + " " + b + "' uses a piece that is not in the vocabulary");
    m.merges_.insert_or_assign(pair_key(*ia, *ib), Merge{static_cast<uint32_t>(rank), *ir});  // HF keeps the last
  }
  return m;
}

BpeModel BpeModel::from_scores(std::vector<std::string> pieces, const std::vector<float>& scores,
                               const std::vector<uint8_t>& mergeable, Options options) {
  BpeModel m(std::move(pieces), options);
  // Equal scores share a rank, so the leftmost pair wins among them, as in SentencePiece.
  std::vector<float> distinct;
  for (size_t id = 0; id < m.pieces_.size(); ++id)
    if (mergeable[id]) distinct.push_back(scores[id]);
  std::sort(distinct.begin(), distinct.end(), std::greater<>());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  for (size_t id = 0; id < m.pieces_.size(); ++id) {
    if (!mergeable[id]) continue;
    const std::string_view p = m.pieces_[id];
    const auto rank = static_cast<uint32_t>(
        std::lower_bound(distinct.begin(), distinct.end(), scores[id], std::greater<>()) - distinct.begin());
    size_t k = 0;
    next_code_point(p, k);
    while (k < p.size()) {
      const auto ia = m.id_of(p.substr(0, k)), ib = m.id_of(p.substr(k));
      if (ia && ib) m.merges_.emplace(pair_key(*ia, *ib), Merge{rank, static_cast<int32_t>(id)});
      next_code_point(p, k);
    }
  }
  return m;
}

std::optional<int32_t> BpeModel::id_of(std::string_view piece) const {
  const auto it = ids_.find(piece);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::merge_symbols(std::string_view text, std::vector<int32_t>& out) const {
  if (options_.ignore_merges) {
    if (auto id = id_of(text)) {
      out.push_back(*id);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev, next;
  };
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  auto push = [&](int32_t id) {
    const auto n = static_cast<int32_t>(sym.size());
    sym.push_back({id, n - 1, n + 1});
  };
  bool last_unk = false;
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    next_code_point(text, i);
    const std::string_view ch = text.substr(start, i - start);
    if (auto id = id_of(ch)) {
      push(*id);
      last_unk = false;
      continue;
    }
    if (options_.byte_fallback &&
        std::all_of(ch.begin(), ch.end(), [&](char c) { return byte_ids_[static_cast<unsigned char>(c)] >= 0; })) {
      for (char c : ch) push(byte_ids_[static_cast<unsigned char>(c)]);
      last_unk = false;
      continue;
    }
    if (!options_.unk_id) continue;  // HF drops what it cannot name
    if (!(options_.fuse_unk && last_unk)) push(*options_.unk_id);
    last_unk = true;
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t result;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int32_t left) {
    if (left < 0 || sym[left].next < 0) return;
    const auto it = merges_.find(pair_key(sym[left].id, sym[sym[left].next].id));
    if (it != merges_.end()) queue.push({it->second.rank, left, it->second.result});
  };
  for (int32_t p = 0; p + 1 < static_cast<int32_t>(sym.size()); ++p) consider(p);
  std::vector<uint8_t> dead(sym.size(), 0);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = sym[c.pos];
    if (dead[c.pos] || left.next < 0) continue;
    const auto it = merges_.find(pair_key(left.id, sym[left.next].id));
    if (it == merges_.end() || it->second.rank != c.rank || it->second.result != c.result) continue;
    const int32_t right = left.next;
    dead[right] = 1;
    left.id = c.result;
    left.next = sym[right].next;
    if (left.next >= 0) sym[left.next].prev = c.pos;
    consider(left.prev);
    consider(c.pos);
  }
  for (int32_t p = 0; p >= 0; p = sym[p].next) out.push_back(sym[p].id);
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  const bool cacheable = piece.size() <= Cache::kMaxPieceBytes;
  size_t slot_index = 0;
  if (cacheable) {
    slot_index = std::hash<std::string_view>{}(piece) & (Cache::kSlots - 1);
    std::lock_guard<std::mutex> lock(cache_->locks[slot_index % Cache::kLocks]);
    const Cache::Slot& slot = cache_->slots[slot_index];
    if (slot.used && slot.key == piece) {
      out.insert(out.end(), slot.ids.begin(), slot.ids.end());
      return;
    }
  }
  const size_t first = out.size();
  if (options_.byte_level) {
    std::string mapped;
    mapped.reserve(piece.size() * 2);
    append_byte_level(piece, mapped);
    merge_symbols(mapped, out);
  } else {
    merge_symbols(piece, out);
  }
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->locks[slot_index % Cache::kLocks]);
    Cache::Slot& slot = cache_->slots[slot_index];
    slot.key.assign(piece.data(), piece.size());
    slot.ids.assign(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
    slot.used = true;
  }
}

}  // namespace orzo
