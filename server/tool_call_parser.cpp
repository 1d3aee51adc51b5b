#include "server/tool_call_parser.hpp"

#include "core/ordered_json.hpp"

#include <nlohmann/json.hpp>

namespace orzo {
namespace {

using Json = nlohmann::ordered_json;  // the arguments keep the order the model wrote them in

constexpr const char* kOpen = "<tool_call>";
constexpr const char* kClose = "</tool_call>";
constexpr const char* kPythonTag = "<|python_tag|>";
constexpr const char* kMistral = "[TOOL_CALLS]";

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// One call object: {"name": "...", "arguments" or "parameters": {...}}.
bool read_call(const Json& v, ParsedToolCall& out) {
  if (!v.is_object() || !v.contains("name") || !v["name"].is_string()) return false;
  const Json* args = v.contains("arguments") ? &v["arguments"] : v.contains("parameters") ? &v["parameters"] : nullptr;
  out.name = v["name"].get<std::string>();
  if (!args || args->is_null()) {
    out.arguments = "{}";
  } else if (args->is_string()) {
    out.arguments = args->get<std::string>();  // some models write the arguments as a JSON string
  } else {
    out.arguments = args->dump();
  }
  return true;
}

// Where the JSON value starting at `at` ends (one past it), or npos when it does not end.
size_t value_end(const std::string& s, size_t at) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = at; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
  }
  return std::string::npos;
}

// Calls written back to back (separated by ';', ',' or space), all of `text`; false if any
// part is not one.
bool read_sequence(const std::string& text, std::vector<ParsedToolCall>& calls) {
  size_t i = 0;
  while (true) {
    i = text.find_first_not_of(" \t\r\n;,", i);
    if (i == std::string::npos) return !calls.empty();
    if (text[i] != '{') return false;
    const size_t end = value_end(text, i);
    if (end == std::string::npos) return false;
    const auto v = try_parse_ordered_json(std::string_view(text).substr(i, end - i));
    ParsedToolCall call;
    if (!v || !read_call(*v, call)) return false;
    calls.push_back(std::move(call));
    i = end;
  }
}

ToolCallSplit split_hermes(const std::string& text) {
  ToolCallSplit out;
  size_t at = 0;
  while (true) {
    const size_t open = text.find(kOpen, at);
    if (open == std::string::npos) {
      out.content += text.substr(at);
      break;
    }
    const size_t body = open + std::char_traits<char>::length(kOpen);
    const size_t close = text.find(kClose, body);
    const std::string inner = text.substr(body, close == std::string::npos ? std::string::npos : close - body);
    const auto v = try_parse_ordered_json(trim(inner));
    ParsedToolCall call;
    const size_t next = close == std::string::npos ? text.size() : close + std::char_traits<char>::length(kClose);
    if (v && read_call(*v, call)) {
      out.content += text.substr(at, open - at);
      out.calls.push_back(std::move(call));
    } else {
      out.content += text.substr(at, next - at);
    }
    at = next;
  }
  if (!out.calls.empty()) out.content = trim(out.content);
  return out;
}

// The longest end of `s` that `marker` starts with: what may still become the marker.
size_t partial_marker(const std::string& s, const std::string& marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.compare(s.size() - n, n, marker, 0, n) == 0) return n;
  return 0;
}

}  // namespace

ToolCallSplit split_tool_calls(grammar::ToolCallFormat format, const std::string& text) {
  if (format == grammar::ToolCallFormat::hermes) return split_hermes(text);
  ToolCallSplit out;
  std::string body = trim(text);
  std::string before;
  if (format == grammar::ToolCallFormat::mistral) {
    const size_t marker = body.find(kMistral);
    if (marker == std::string::npos) return {text, {}};
    before = trim(body.substr(0, marker));
    body = body.substr(marker + std::char_traits<char>::length(kMistral));
    const auto v = try_parse_ordered_json(trim(body));
    if (!v) return {text, {}};
    for (const auto& item : v->is_array() ? *v : Json::array({*v})) {
      ParsedToolCall call;
      if (!read_call(item, call)) return {text, {}};
      out.calls.push_back(std::move(call));
    }
    out.content = before;
    return out;
  }
  if (body.rfind(kPythonTag, 0) == 0) body = body.substr(std::char_traits<char>::length(kPythonTag));
  if (!read_sequence(body, out.calls)) return {text, {}};
  return out;
}

ToolCallSplit ToolCallStream::feed(const std::string& text) {
  ToolCallSplit out;
  if (plain_) {
    out.content = text;
    return out;
  }
  pending_ += text;
  if (format_ == grammar::ToolCallFormat::hermes) {
    // Show everything up to a call's start; hold a call until it closes.
    while (true) {
      const size_t open = pending_.find(kOpen);
      if (open == std::string::npos) {
        const size_t keep = partial_marker(pending_, kOpen);
        out.content += pending_.substr(0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        break;
      }
      out.content += pending_.substr(0, open);
      pending_.erase(0, open);
      const size_t close = pending_.find(kClose);
      if (close == std::string::npos) break;
      const size_t end = close + std::char_traits<char>::length(kClose);
      ToolCallSplit one = split_hermes(pending_.substr(0, end));
      out.content += one.content;
      for (auto& c : one.calls) out.calls.push_back(std::move(c));
      pending_.erase(0, end);
    }
    return out;
  }
  // llama3_json and mistral: the output is calls when it starts with their markup, decided by
  // its first characters; calls are read once it is whole.
  if (whole_output_) return out;
  const std::string head = trim(pending_);
  if (head.empty()) return out;
  const std::string marker = format_ == grammar::ToolCallFormat::mistral ? kMistral : "{";
  const bool may_be = head.size() < marker.size() ? marker.compare(0, head.size(), head) == 0
                                                  : head.compare(0, marker.size(), marker) == 0;
  const bool python_tag = format_ == grammar::ToolCallFormat::llama3_json &&
                          (head.rfind(kPythonTag, 0) == 0 || std::string(kPythonTag).rfind(head, 0) == 0);
  if (may_be || python_tag) {
    if (head.size() >= marker.size() || (python_tag && head.size() >= std::char_traits<char>::length(kPythonTag)))
      whole_output_ = true;
    return out;
  }
  plain_ = true;
  out.content = std::move(pending_);
  pending_.clear();
  return out;
}

ToolCallSplit ToolCallStream::finish() {
  std::string rest = std::move(pending_);
  pending_.clear();
  if (rest.empty()) return {};
  if (format_ == grammar::ToolCallFormat::hermes) return split_hermes(rest);
  return split_tool_calls(format_, rest);
}

}  // namespace orzo
