#include "server/api_error.hpp"

#include "server/json_text.hpp"

namespace orzo {

std::string error_body(const ApiError& error) {
  auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  const nlohmann::ordered_json body = {{"error",
                                        {{"message", error.what()},
                                         {"type", error.type},
                                         {"param", or_null(error.param)},
                                         {"code", or_null(error.code)}}}};
  return json_text(body);
}

}  // namespace orzo
