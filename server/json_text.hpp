#pragma once
// How every JSON body the server writes is turned into text: one line, and invalid UTF-8
// (a token's bytes may be part of a character, a client may send anything) replaced by
// U+FFFD instead of thrown.
#include <nlohmann/json.hpp>

#include <string>

namespace orzo {

inline std::string json_text(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace orzo
