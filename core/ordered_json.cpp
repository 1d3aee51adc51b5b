#include "core/ordered_json.hpp"

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace orzo {
namespace {

using Json = nlohmann::ordered_json;

// Below this many keys an object finds a duplicate by scanning its keys; from it on, by a
// hash of them (built once, when the object reaches the size).
constexpr size_t kScanKeys = 16;

std::string untagged(const std::string& what) {
  const size_t tag_end = what.find("] ");
  return tag_end == std::string::npos ? what : what.substr(tag_end + 2);
}

class Builder {
 public:
  explicit Builder(int max_depth) : max_depth_(max_depth) {}

  bool null() { return add(Json(nullptr)); }
  bool boolean(bool v) { return add(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return add(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return add(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t&) { return add(Json(v)); }
  bool string(Json::string_t& v) { return add(Json(std::move(v))); }
  bool binary(Json::binary_t& v) { return add(Json::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool key(Json::string_t& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    throw JsonSyntaxError(untagged(e.what()));
  }

  Json take() { return std::move(root_); }

 private:
  struct Open {
    Json* value;
    std::unique_ptr<std::unordered_map<std::string, size_t>> keys;  // an object's, once it is large
  };

  bool open(Json container) {
    if (static_cast<int>(stack_.size()) >= max_depth_)
      throw JsonSyntaxError("nested deeper than " + std::to_string(max_depth_) + " levels");
    stack_.push_back({add_place(std::move(container)), nullptr});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  bool add(Json v) {
    add_place(std::move(v));
    return true;
  }

  // Stores v where the text puts it and returns where it lies. A container stays at that
  // address while it is open: its parent grows only after it closes.
  Json* add_place(Json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Open& top = stack_.back();
    if (top.value->is_array()) {
      auto& array = top.value->get_ref<Json::array_t&>();
      array.push_back(std::move(v));
      return &array.back();
    }
    auto& object = top.value->get_ref<Json::object_t&>();
    // ordered_map is a vector of pairs: appending through the vector skips its key search.
    auto& pairs = static_cast<Json::object_t::Container&>(object);
    if (const size_t at = find(top, pairs); at < pairs.size()) {
      pairs[at].second = std::move(v);
      return &pairs[at].second;
    }
    if (top.keys) top.keys->emplace(key_, pairs.size());
    pairs.emplace_back(std::move(key_), std::move(v));
    if (!top.keys && pairs.size() == kScanKeys) {
      top.keys = std::make_unique<std::unordered_map<std::string, size_t>>();
      for (size_t i = 0; i < pairs.size(); ++i) top.keys->emplace(pairs[i].first, i);
    }
    return &pairs.back().second;
  }

  size_t find(const Open& top, const Json::object_t::Container& pairs) const {
    if (top.keys) {
      auto it = top.keys->find(key_);
      return it == top.keys->end() ? pairs.size() : it->second;
    }
    for (size_t i = 0; i < pairs.size(); ++i)
      if (pairs[i].first == key_) return i;
    return pairs.size();
  }

  int max_depth_;
  Json root_;
  std::vector<Open> stack_;
  std::string key_;
};

}  // namespace

nlohmann::ordered_json parse_ordered_json(std::string_view text, int max_depth) {
  Builder builder(max_depth);
  try {
    Json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const nlohmann::json::exception& e) {
    throw JsonSyntaxError(untagged(e.what()));
  }
  return builder.take();
}

std::optional<nlohmann::ordered_json> try_parse_ordered_json(std::string_view text) {
  try {
    return parse_ordered_json(text);
  } catch (const JsonSyntaxError&) {
    return std::nullopt;
  }
}

}  // namespace orzo
