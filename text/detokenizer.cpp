#include "text/detokenizer.hpp"

#include <stdexcept>

namespace orzo {

Detokenizer::Detokenizer(const DecodeTable& table, bool skip_special)
    : table_(&table), skip_special_(skip_special) {}

std::string_view Detokenizer::push(int32_t id) {
  if (finished_) throw std::logic_error("Detokenizer: push after finish");
  delta_.clear();
  if (id < 0 || static_cast<size_t>(id) >= table_->bytes.size()) return {};
  if (skip_special_ && static_cast<size_t>(id) < table_->special.size() && table_->special[id]) return {};
  std::string_view bytes = table_->bytes[id];
  if (at_start_ && !bytes.empty()) {
    at_start_ = false;
    if (table_->strip_leading_space && bytes.front() == ' ') bytes.remove_prefix(1);
  }
  utf8_.feed(bytes, delta_);
  return delta_;
}

std::string_view Detokenizer::finish() {
  if (finished_) throw std::logic_error("Detokenizer: finish called twice");
  finished_ = true;
  delta_.clear();
  utf8_.finish(delta_);
  return delta_;
}

}  // namespace orzo
