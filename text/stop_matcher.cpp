#include "text/stop_matcher.hpp"

#include <limits>
#include <stdexcept>

#include "text/utf8.hpp"

namespace orzo {
namespace {

constexpr uint32_t kAbsent = std::numeric_limits<uint32_t>::max();

}  // namespace

std::optional<std::string> stop_string_problem(std::string_view stop) {
  if (stop.empty()) return "must not be empty";
  if (!valid_utf8(stop)) return "must be valid UTF-8";
  return std::nullopt;
}

StopMatcher::StopMatcher(std::vector<std::string> stops, bool include_stop)
    : stops_(std::move(stops)), include_stop_(include_stop), byte_class_(256, 0) {
  for (size_t i = 0; i < stops_.size(); ++i)
    if (auto why = stop_string_problem(stops_[i]))
      throw std::invalid_argument("stop string " + std::to_string(i) + " " + *why);

  // Bytes that occur in no stop string all behave alike (back to the root); each other
  // byte gets a class of its own. This keeps the table a few KiB instead of 1 KiB a node.
  for (const auto& stop : stops_)
    for (const char c : stop) byte_class_[static_cast<uint8_t>(c)] = 1;
  for (auto& c : byte_class_)
    if (c) c = static_cast<uint16_t>(num_classes_++);

  // The trie, its missing edges marked kAbsent.
  auto add_node = [&](uint32_t depth, uint32_t owner) {
    next_.insert(next_.end(), num_classes_, kAbsent);
    depth_.push_back(depth);
    owner_.push_back(owner);
    match_len_.push_back(0);
    match_stop_.push_back(-1);
    return static_cast<uint32_t>(depth_.size() - 1);
  };
  add_node(0, 0);
  for (size_t i = 0; i < stops_.size(); ++i) {
    uint32_t v = 0;
    for (const char c : stops_[i]) {
      const size_t edge = v * num_classes_ + byte_class_[static_cast<uint8_t>(c)];
      if (next_[edge] == kAbsent) {
        const uint32_t child = add_node(depth_[v] + 1, static_cast<uint32_t>(i));
        next_[edge] = child;  // not through a reference: add_node grows next_
      }
      v = next_[edge];
    }
    if (match_stop_[v] < 0) {  // a repeated stop string keeps its first index
      match_len_[v] = depth_[v];
      match_stop_[v] = static_cast<int32_t>(i);
    }
  }

  // Breadth first, so a node's failure link (its longest proper suffix in the trie) is
  // complete before its children need it; missing edges then borrow the failure link's.
  std::vector<uint32_t> fail(depth_.size(), 0), queue;
  for (uint32_t c = 0; c < num_classes_; ++c) {
    uint32_t& edge = next_[c];
    if (edge == kAbsent)
      edge = 0;
    else
      queue.push_back(edge);
  }
  for (size_t head = 0; head < queue.size(); ++head) {
    const uint32_t u = queue[head];
    for (uint32_t c = 0; c < num_classes_; ++c) {
      const uint32_t via_fail = next_[fail[u] * num_classes_ + c];
      uint32_t& edge = next_[u * num_classes_ + c];
      if (edge == kAbsent) {
        edge = via_fail;
        continue;
      }
      fail[edge] = via_fail;
      if (match_len_[edge] == 0) {
        match_len_[edge] = match_len_[via_fail];
        match_stop_[edge] = match_stop_[via_fail];
      }
      queue.push_back(edge);
    }
  }
}

std::string_view StopMatcher::held_text() const {
  if (state_ == 0) return {};  // the root has no owner when there are no stop strings
  return std::string_view(stops_[owner_[state_]]).substr(0, depth_[state_]);
}

void StopMatcher::release(std::string_view held, std::string_view delta, size_t length) {
  out_.clear();
  out_.append(held.substr(0, length));
  if (length > held.size()) out_.append(delta.substr(0, length - held.size()));
}

StopMatcher::Result StopMatcher::push(std::string_view delta) {
  if (stopped()) throw std::logic_error("StopMatcher: push after a stop string matched");
  if (finished_) throw std::logic_error("StopMatcher: push after finish");
  const std::string_view held = held_text();
  const uint32_t* next = next_.data();
  const uint16_t* byte_class = byte_class_.data();
  uint32_t s = state_;
  for (size_t i = 0; i < delta.size(); ++i) {
    s = next[s * num_classes_ + byte_class[static_cast<uint8_t>(delta[i])]];
    if (match_len_[s]) {
      const size_t end = held.size() + i + 1;  // in held + delta
      matched_ = match_stop_[s];
      release(held, delta, include_stop_ ? end : end - match_len_[s]);
      state_ = 0;
      return {out_, true};
    }
  }
  state_ = s;
  release(held, delta, held.size() + delta.size() - depth_[s]);
  return {out_, false};
}

std::string_view StopMatcher::finish() {
  if (finished_) throw std::logic_error("StopMatcher: finish called twice");
  finished_ = true;
  out_.clear();
  if (!stopped()) out_.append(held_text());
  state_ = 0;
  return out_;
}

}  // namespace orzo
