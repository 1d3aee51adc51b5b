#include "runtime/batch_check.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace orzo {

namespace {

[[noreturn]] void bad_batch(const std::string& what) { throw std::invalid_argument("forward batch: " + what); }

}  // namespace

void check_batch(const ForwardBatch& b, const BatchBounds& bounds) {
  const int64_t rows = b.rows();
  const int32_t groups = bounds.layout ? bounds.layout->groups() : 1;
  if (b.kv_groups != groups)
    bad_batch("it has " + std::to_string(b.kv_groups) + " groups of block tables, the stage keeps " + std::to_string(groups));
  if (b.block_tables.size() % static_cast<size_t>(groups) != 0)
    bad_batch(std::to_string(b.block_tables.size()) + " block tables are not " + std::to_string(groups) + " per sequence");
  if (static_cast<int64_t>(b.seq_index.size()) != rows) bad_batch("seq_index and positions differ in length");
  if (bounds.embeds && static_cast<int64_t>(b.tokens.size()) != rows) bad_batch("tokens and positions differ in length");
  if (!bounds.embeds && bounds.hidden_floats >= 0 && bounds.hidden_floats != rows * bounds.hidden_size)
    bad_batch("hidden state holds " + std::to_string(bounds.hidden_floats) + " floats, expected " +
              std::to_string(rows * bounds.hidden_size));
  const int32_t sequences = b.sequences();
  // Per sequence, the earliest position any of its rows reads in a sliding group: a table may
  // have given back what lies before the window of that row.
  std::vector<int32_t> first_read(static_cast<size_t>(sequences), std::numeric_limits<int32_t>::max());
  for (int64_t r = 0; r < rows; ++r) {
    const auto i = static_cast<size_t>(r);
    if (bounds.embeds && (b.tokens[i] < 0 || b.tokens[i] >= bounds.vocab_size))
      bad_batch("token id " + std::to_string(b.tokens[i]) + " is outside the vocabulary of " +
                std::to_string(bounds.vocab_size));
    if (b.seq_index[i] < 0 || b.seq_index[i] >= sequences)
      bad_batch("row " + std::to_string(r) + " names sequence " + std::to_string(b.seq_index[i]) + " of " +
                std::to_string(sequences));
    for (int32_t g = 0; g < groups; ++g)
      if (b.positions[i] < 0 || b.positions[i] / bounds.block_size >= static_cast<int32_t>(b.table(g, b.seq_index[i]).size()))
        bad_batch("position " + std::to_string(b.positions[i]) + " of row " + std::to_string(r) +
                  " is outside its block table");
    auto& first = first_read[static_cast<size_t>(b.seq_index[i])];
    first = std::min(first, b.positions[i]);
  }
  for (int32_t g = 0; g < groups; ++g) {
    const int32_t window = bounds.layout ? bounds.layout->windows[static_cast<size_t>(g)] : 0;
    for (int32_t s = 0; s < sequences; ++s) {
      const auto& table = b.table(g, s);
      // A sequence without rows reads nothing; one with rows reads from its first row's window on.
      const int32_t first = first_read[static_cast<size_t>(s)];
      const int32_t read_from =
          first == std::numeric_limits<int32_t>::max() ? 0 : first_block_read(window, first, bounds.block_size);
      for (size_t j = 0; j < table.size(); ++j) {
        const int32_t block = table[j];
        if (block == kNoBlock && window > 0 && static_cast<int32_t>(j) < read_from) continue;
        if (block < 0 || block >= bounds.kv_blocks) bad_batch("KV block id " + std::to_string(block) + " out of range");
      }
    }
  }
  for (auto r : b.logit_rows)
    if (r < 0 || r >= rows) bad_batch("logit row " + std::to_string(r) + " out of range");
}

}  // namespace orzo
