#pragma once
// The one shape every HTTP error takes, as OpenAI sends it:
//   {"error": {"message": ..., "type": ..., "param": ... | null, "code": ... | null}}
// with the status that goes with it. Thrown by the request parsers and the endpoint
// handlers; the connection turns it into the response.

#include <stdexcept>
#include <string>

namespace orzo {

struct ApiError : std::runtime_error {
  ApiError(int http_status, std::string message, std::string error_type = "invalid_request_error",
           std::string error_param = {}, std::string error_code = {})
      : std::runtime_error(std::move(message)), status(http_status), type(std::move(error_type)),
        param(std::move(error_param)), code(std::move(error_code)) {}

  int status;         // HTTP status: 400, 401, 404, 405, 413, 429, 500, 503, ...
  std::string type;   // "invalid_request_error", "authentication_error", "rate_limit_error", "server_error"
  std::string param;  // the request field at fault; empty: null
  std::string code;   // "model_not_found", "invalid_api_key", "context_length_exceeded", ...; empty: null
};

// The JSON body above, one line.
std::string error_body(const ApiError& error);

}  // namespace orzo
