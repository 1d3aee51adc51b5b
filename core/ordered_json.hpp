#pragma once
// JSON text to nlohmann::ordered_json in time linear in the text.
//
// ordered_json keeps an object's keys in the order they came, which schemas (property order
// is generation order) and tool lists need; but nlohmann's own parser inserts each key by a
// linear search of the keys before it, so an object of n keys costs n^2/2 string compares,
// and one request body of 8 MiB can hold 600,000 keys (which took 8.6 minutes to parse:
// docs/BENCHMARKS.md). This parser appends each key and finds duplicates through a hash of
// the open object's keys. A duplicate keeps its first place and takes the last value, as
// nlohmann's parser does.
#include <nlohmann/json.hpp>

#include <optional>
#include <stdexcept>
#include <string_view>

namespace orzo {

// Bad JSON, or JSON nested deeper than the limit; what() is the reason without nlohmann's
// "[json.exception...]" tag.
struct JsonSyntaxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws JsonSyntaxError. max_depth: the most objects and arrays open at once.
nlohmann::ordered_json parse_ordered_json(std::string_view text, int max_depth = 512);

// The same, for text that may be no JSON at all (a model's output): nullopt then.
std::optional<nlohmann::ordered_json> try_parse_ordered_json(std::string_view text);

}  // namespace orzo
