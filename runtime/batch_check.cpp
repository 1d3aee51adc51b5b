#include "runtime/batch_check.hpp"

#include <stdexcept>
#include <string>

namespace orzo {

namespace {

[[noreturn]] void bad_batch(const std::string& what) { throw std::invalid_argument("forward batch: " + what); }

}  // namespace

void check_batch(const ForwardBatch& b, const BatchBounds& bounds) {
  const int64_t rows = b.rows();
  if (static_cast<int64_t>(b.seq_index.size()) != rows) bad_batch("seq_index and positions differ in length");
  if (bounds.embeds && static_cast<int64_t>(b.tokens.size()) != rows) bad_batch("tokens and positions differ in length");
  if (!bounds.embeds && bounds.hidden_floats >= 0 && bounds.hidden_floats != rows * bounds.hidden_size)
    bad_batch("hidden state holds " + std::to_string(bounds.hidden_floats) + " floats, expected " +
              std::to_string(rows * bounds.hidden_size));
  for (int64_t r = 0; r < rows; ++r) {
    const auto i = static_cast<size_t>(r);
    if (bounds.embeds && (b.tokens[i] < 0 || b.tokens[i] >= bounds.vocab_size))
      bad_batch("token id " + std::to_string(b.tokens[i]) + " is outside the vocabulary of " +
                std::to_string(bounds.vocab_size));
    if (b.seq_index[i] < 0 || static_cast<size_t>(b.seq_index[i]) >= b.block_tables.size())
      bad_batch("row " + std::to_string(r) + " names sequence " + std::to_string(b.seq_index[i]) + " of " +
                std::to_string(b.block_tables.size()));
    const auto& table = b.block_tables[static_cast<size_t>(b.seq_index[i])];
    if (b.positions[i] < 0 || b.positions[i] / bounds.block_size >= static_cast<int32_t>(table.size()))
      bad_batch("position " + std::to_string(b.positions[i]) + " of row " + std::to_string(r) +
                " is outside its block table");
  }
  for (const auto& table : b.block_tables)
    for (auto block : table)
      if (block < 0 || block >= bounds.kv_blocks) bad_batch("KV block id " + std::to_string(block) + " out of range");
  for (auto r : b.logit_rows)
    if (r < 0 || r >= rows) bad_batch("logit row " + std::to_string(r) + " out of range");
}

}  // namespace orzo
