#include "text/detokenizer.hpp"

#include <stdexcept>

namespace orzo {

Detokenizer::Detokenizer(const DecodeTable& table, bool skip_special)
    : table_(&table), skip_special_(skip_special) {}

std::string_view Detokenizer::text_of(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= table_->bytes.size()) return {};
  if (skip_special_ && static_cast<size_t>(id) < table_->special.size() && table_->special[id]) return {};
  return table_->bytes[id];
}

std::string_view Detokenizer::push(int32_t id) {
  if (finished_) throw std::logic_error("Detokenizer: push after finish");
  pushed_ = true;
  delta_.clear();
  std::string_view bytes = text_of(id);
  if (at_start_ && !bytes.empty()) {
    at_start_ = false;
    if (table_->strip_leading_space && bytes.front() == ' ') bytes.remove_prefix(1);
  }
  utf8_.feed(bytes, delta_);
  return delta_;
}

void Detokenizer::continue_after(const std::vector<int32_t>& context) {
  if (pushed_ || finished_) throw std::logic_error("Detokenizer: continue_after after the text began");
  // Only byte-fallback tokens (one byte each) leave a character unfinished, and the repair
  // holds at most three bytes, so the last four tokens decide what is held; the earlier ones
  // only whether the text has begun.
  constexpr size_t kTail = 4;
  const size_t tail = context.size() > kTail ? context.size() - kTail : 0;
  for (size_t i = tail; i-- > 0 && at_start_;)
    if (!text_of(context[i]).empty()) at_start_ = false;
  for (size_t i = tail; i < context.size(); ++i) push(context[i]);
  delta_.clear();
  pushed_ = false;
}

std::string_view Detokenizer::finish() {
  if (finished_) throw std::logic_error("Detokenizer: finish called twice");
  finished_ = true;
  delta_.clear();
  utf8_.finish(delta_);
  return delta_;
}

}  // namespace orzo
