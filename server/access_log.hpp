#pragma once
// The access log: one line per HTTP request answered, whatever its status, as llama.cpp's
// request log. The connection fills in what every request has (method, path, status,
// duration); a generation request adds its tokens and time to first token.

#include "server/log_format.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace orzo {

// Status of a request whose client went away before any status line was sent (nginx's).
constexpr int kClientClosedRequest = 499;

struct AccessRecord {
  struct Generation {
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
    std::optional<double> ttft_seconds;  // none when no token came
  };
  std::string method;  // "-" when the request did not parse that far
  std::string path;    // without the query string
  int status = 0;
  std::optional<Generation> generation;
  double duration_seconds = 0;  // from the whole request read to the whole answer written
};

// The record's line, without the newline. Text: "access: POST /v1/completions 200
// prompt_tokens=5 completion_tokens=16 ttft=12.3ms duration=45.6ms" (generation fields only
// when known). JSON: {"log":"access","method",...} with every field always present, null when
// unknown.
std::string access_line(const AccessRecord& record, LogFormat format);

}  // namespace orzo
