#include "runtime/null_backend.hpp"

#include <stdexcept>
#include <string>

namespace orzo {

void NullBackend::forward(const ForwardBatch& batch, std::vector<float>& hidden, std::vector<float>& logits) {
  hidden.clear();
  logits.assign(batch.logit_rows.size() * static_cast<size_t>(vocab_), 0.0f);
  for (size_t i = 0; i < batch.logit_rows.size(); ++i) {
    const auto row = static_cast<size_t>(batch.logit_rows[i]);
    if (row >= batch.tokens.size()) throw std::invalid_argument("logit row " + std::to_string(row) + " out of range");
    const int32_t token = batch.tokens[row];
    if (token < 0 || token >= vocab_) throw std::invalid_argument("token id " + std::to_string(token) + " is outside the vocabulary");
    logits[i * static_cast<size_t>(vocab_) + static_cast<size_t>((token + 1) % vocab_)] = 1.0f;
  }
}

}  // namespace orzo
