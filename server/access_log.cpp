#include "server/access_log.hpp"

#include "server/json_text.hpp"

#include <cmath>
#include <cstdio>

namespace orzo {
namespace {

// Milliseconds to a microsecond: finer is noise, and JSON then shows a short number.
double millis(double seconds) { return std::round(seconds * 1e6) / 1e3; }

std::string format_millis(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fms", millis(seconds));
  return buf;
}

// A client chooses the method and path: in text, bytes outside printable ASCII (and the
// space that separates fields) are escaped, so no request can forge a line or a field.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c > ' ' && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out.empty() ? "-" : out;
}

std::string text_line(const AccessRecord& r) {
  std::string out = "access: " + printable(r.method) + " " + printable(r.path) + " " + std::to_string(r.status);
  if (r.generation) {
    out += " prompt_tokens=" + std::to_string(r.generation->prompt_tokens);
    out += " completion_tokens=" + std::to_string(r.generation->completion_tokens);
    if (r.generation->ttft_seconds) out += " ttft=" + format_millis(*r.generation->ttft_seconds);
  }
  return out + " duration=" + format_millis(r.duration_seconds);
}

std::string json_line(const AccessRecord& r) {
  nlohmann::ordered_json j = {{"log", "access"}, {"method", r.method}, {"path", r.path}, {"status", r.status}};
  j["prompt_tokens"] = r.generation ? nlohmann::ordered_json(r.generation->prompt_tokens) : nullptr;
  j["completion_tokens"] = r.generation ? nlohmann::ordered_json(r.generation->completion_tokens) : nullptr;
  j["ttft_ms"] = r.generation && r.generation->ttft_seconds
                     ? nlohmann::ordered_json(millis(*r.generation->ttft_seconds))
                     : nullptr;
  j["duration_ms"] = millis(r.duration_seconds);
  return json_text(j);
}

}  // namespace

std::string access_line(const AccessRecord& record, LogFormat format) {
  return format == LogFormat::json ? json_line(record) : text_line(record);
}

}  // namespace orzo
