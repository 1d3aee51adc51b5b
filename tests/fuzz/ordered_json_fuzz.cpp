// core/ordered_json: never crashes, and agrees with nlohmann's own ordered parser, which it
// replaces for its linear time: the same values in the same order, or an error for both.
#include "core/ordered_json.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using Json = nlohmann::ordered_json;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<Json> mine, theirs;
  try {
    mine = orzo::parse_ordered_json(text, 1 << 20);  // deeper than any input: no depth refusals
  } catch (const orzo::JsonSyntaxError&) {
  }
  try {
    theirs = Json::parse(text);
  } catch (const nlohmann::json::exception&) {
  }
  if (mine.has_value() != theirs.has_value()) std::abort();
  const auto dump = [](const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); };
  if (mine && dump(*mine) != dump(*theirs)) std::abort();
  return 0;
}
