#include "server/openai_request.hpp"

#include "core/ordered_json.hpp"
#include "server/json_text.hpp"
#include "text/stop_matcher.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <type_traits>

namespace orzo {
namespace {

using Json = nlohmann::ordered_json;

// Deeper JSON than this is refused while parsing: templates, copies and dumps of the
// messages and chat_template_kwargs recurse, and no real request nests this far.
constexpr int kMaxDepth = 64;
constexpr size_t kMaxStops = 16;
// The stop strings' matcher holds a table row per byte of them, a few hundred bytes each.
constexpr size_t kMaxStopBytes = 16384;
constexpr int64_t kMaxN = 128;
// Each choice of each prompt is a sequence of its own: one request may not flood the queue.
constexpr size_t kMaxSequences = 256;
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

[[noreturn]] void refuse(const std::string& param, const std::string& message) {
  throw ApiError(400, message, "invalid_request_error", param);
}

std::string type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::binary: return "binary";
    case Json::value_t::discarded: return "nothing";
    default: return "a number";
  }
}

std::string format_number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}

// A value as it appears in an error message, cut short so a huge string cannot bloat it.
std::string shown(const Json& v) {
  std::string text = json_text(v);
  constexpr size_t kMaxShown = 40;
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown) + "...";
  return text;
}

Json parse_object(std::string_view body) {
  Json body_json;
  try {
    body_json = parse_ordered_json(body, kMaxDepth);
  } catch (const JsonSyntaxError& e) {
    refuse("", std::string("invalid JSON: ") + e.what());
  }
  if (!body_json.is_object()) refuse("", "the request body must be a JSON object, got " + type_name(body_json));
  return body_json;
}

// ---- typed readers: each takes the value and where it sits, for errors ----

// The field an error names in `param`, and how its message names the value: the field
// itself, or one element of it ("stop[2]", "logit_bias[\"7\"]").
struct Where {
  Where(const std::string& field) : param(field), label(field) {}  // implicit: a field names itself
  Where(std::string field, std::string element) : param(std::move(field)), label(std::move(element)) {}
  std::string param;
  std::string label;
};

std::string element(const std::string& label, size_t i) { return label + "[" + std::to_string(i) + "]"; }

[[noreturn]] void refuse(const Where& at, const std::string& what) { refuse(at.param, at.label + " " + what); }

bool read_bool(const Json& v, const Where& at) {
  if (!v.is_boolean()) refuse(at, "must be a boolean, got " + type_name(v));
  return v.get<bool>();
}

std::string read_string(const Json& v, const Where& at) {
  if (!v.is_string()) refuse(at, "must be a string, got " + type_name(v));
  return v.get<std::string>();
}

const Json& read_object(const Json& v, const Where& at) {
  if (!v.is_object()) refuse(at, "must be an object, got " + type_name(v));
  return v;
}

const Json& read_array(const Json& v, const Where& at) {
  if (!v.is_array()) refuse(at, "must be an array, got " + type_name(v));
  return v;
}

// An interval of reals; open at the low end when lo_open ("(0, 1]").
struct Range {
  double lo;
  double hi;
  bool lo_open = false;
};

float read_float(const Json& v, const Where& at, Range range) {
  if (!v.is_number()) refuse(at, "must be a number, got " + type_name(v));
  const double d = v.get<double>();
  const bool in_range = (range.lo_open ? d > range.lo : d >= range.lo) && d <= range.hi;
  // The range must hold for the float the sampler gets too: 1e-50 is above 0 but rounds to it.
  const float x = in_range ? static_cast<float>(d) : 0.0f;
  if (!in_range || (range.lo_open && x <= range.lo)) {
    refuse(at, std::string("must be in ") + (range.lo_open ? "(" : "[") + format_number(range.lo) + ", " +
                   format_number(range.hi) + "], got " + shown(v));
  }
  return x;
}

// Integers as JSON writes them; a float with no fractional part (16.0) is the same number.
// Values outside [lo, hi] are refused; hi = the type's max reads as "no upper bound". hi >= 0.
template <class T>
T read_integer(const Json& v, const Where& at, T lo, T hi = std::numeric_limits<T>::max()) {
  if (!v.is_number()) refuse(at, "must be an integer, got " + type_name(v));
  bool in_range = false;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d != std::floor(d)) refuse(at, "must be an integer, got " + shown(v));
    // hi + 1 is a power of two for every bound used here, so exact as a double.
    in_range = d >= static_cast<double>(lo) && d < static_cast<double>(hi) + 1.0;
  } else if (v.is_number_unsigned() || v.get<int64_t>() >= 0) {
    const uint64_t u = v.get<uint64_t>();
    in_range = u <= static_cast<uint64_t>(hi) && (lo <= 0 || u >= static_cast<uint64_t>(lo));
  } else {
    in_range = std::is_signed_v<T> && v.get<int64_t>() >= static_cast<int64_t>(lo);
  }
  if (!in_range) {
    const std::string bounds = hi == std::numeric_limits<T>::max()
                                   ? ">= " + std::to_string(lo)
                                   : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    refuse(at, "must be an integer " + bounds + ", got " + shown(v));
  }
  return v.is_number_float() ? static_cast<T>(v.get<double>()) : v.get<T>();
}

std::vector<int32_t> read_token_ids(const Json& v, const Where& at) {
  std::vector<int32_t> ids;
  for (const Json& id : read_array(v, at)) ids.push_back(read_integer<int32_t>(id, {at.param, element(at.label, ids.size())}, 0));
  return ids;
}

// ---- field tables ----

// What reads one top-level field; `name` is the field's key, for errors.
using FieldReader = std::function<void(const Json& value, const std::string& name)>;
using FieldTable = std::map<std::string, FieldReader, std::less<>>;

// Runs each field's reader; null means "the default" for every known field, so it is
// skipped; an unknown key is refused with OpenAI's wording.
void read_fields(const Json& body, const FieldTable& table) {
  for (const auto& [key, value] : body.items()) {
    const auto reader = table.find(key);
    if (reader == table.end()) refuse(key, "Unrecognized request argument supplied: " + key);
    if (!value.is_null()) reader->second(value, key);
  }
}

void require(const Json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) refuse(name, std::string(name) + " is required");
}

// Accepted for compatibility with client libraries, checked for type, otherwise ignored.
void add_ignored_string(FieldTable& table, const char* name) {
  table[name] = [](const Json& v, const std::string& n) { read_string(v, n); };
}

[[noreturn]] void unsupported(const std::string& name, const std::string& why) {
  refuse(name, name + " is not supported" + (why.empty() ? std::string() : ": " + why));
}

// ---- fields shared by completions and chat ----

// Cross-field facts the readers record and finish_generate() checks once all fields are in.
struct GenerateChecks {
  bool stream_options = false;
  std::optional<int32_t> best_of;
};

// Refused here rather than by the session's StopMatcher, so that the 400 names the element.
std::string read_stop_string(const Json& v, const Where& at) {
  std::string stop = read_string(v, at);
  if (auto why = stop_string_problem(stop)) refuse(at, *why);
  return stop;
}

std::vector<std::string> read_stop(const Json& v, const std::string& name) {
  std::vector<std::string> stop;
  if (v.is_string()) {
    stop.push_back(read_stop_string(v, name));
  } else if (v.is_array()) {
    if (v.size() > kMaxStops) refuse(name, name + " may hold at most " + std::to_string(kMaxStops) + " strings");
    for (const Json& s : v) stop.push_back(read_stop_string(s, {name, element(name, stop.size())}));
  } else {
    refuse(name, name + " must be a string or an array of strings, got " + type_name(v));
  }
  size_t bytes = 0;
  for (const auto& s : stop) bytes += s.size();
  if (bytes > kMaxStopBytes)
    refuse(name, name + " may hold " + std::to_string(kMaxStopBytes) + " bytes in all, got " + std::to_string(bytes));
  return stop;
}

// Keys are token ids in canonical decimal ("42", not "042" or "+42"), so two keys never
// name the same token.
std::vector<std::pair<int32_t, float>> read_logit_bias(const Json& v, const std::string& name) {
  std::vector<std::pair<int32_t, float>> bias;
  for (const auto& [key, value] : read_object(v, name).items()) {
    const bool digits = !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos;
    const bool canonical = digits && (key.size() == 1 || key[0] != '0');
    if (!canonical || std::stoll(key) > kInt32Max) {
      refuse(name, name + " keys must be token ids in decimal, got " + shown(Json(key)));
    }
    bias.emplace_back(static_cast<int32_t>(std::stoll(key)), read_float(value, {name, name + "[\"" + key + "\"]"}, {-100, 100}));
  }
  return bias;
}

void add_generate_fields(FieldTable& t, GenerateParams& p, GenerateChecks& checks) {
  SamplingParams& s = p.sampling;
  t["model"] = [&p](const Json& v, const std::string& n) { p.model = read_string(v, n); };
  // 0 only scores a prompt (completions with echo); finish_generate and the parsers hold that.
  t["max_tokens"] = [&p](const Json& v, const std::string& n) { p.max_tokens = read_integer<int32_t>(v, n, 0); };
  t["prompt_logprobs"] = [&p](const Json& v, const std::string& n) {
    p.prompt_logprobs = read_integer<int32_t>(v, n, 0, kMaxTopLogprobs);
  };
  t["min_tokens"] = [&p](const Json& v, const std::string& n) { p.min_tokens = read_integer<int32_t>(v, n, 0); };
  t["n"] = [&p](const Json& v, const std::string& n) { p.n = read_integer<int32_t>(v, n, 1, kMaxN); };
  t["best_of"] = [&checks](const Json& v, const std::string& n) { checks.best_of = read_integer<int32_t>(v, n, 1); };
  t["stream"] = [&p](const Json& v, const std::string& n) { p.stream = read_bool(v, n); };
  t["stream_options"] = [&p, &checks](const Json& v, const std::string& n) {
    checks.stream_options = true;
    for (const auto& [key, value] : read_object(v, n).items()) {
      const std::string path = n + "." + key;
      if (key != "include_usage") refuse(path, "Unrecognized request argument supplied: " + path);
      if (!value.is_null()) p.include_usage = read_bool(value, path);
    }
  };
  t["temperature"] = [&s](const Json& v, const std::string& n) { s.temperature = read_float(v, n, {0, 2}); };
  t["top_p"] = [&s](const Json& v, const std::string& n) { s.top_p = read_float(v, n, {0, 1, true}); };
  t["top_k"] = [&s](const Json& v, const std::string& n) {
    const int32_t k = read_integer<int32_t>(v, n, -1);
    s.top_k = k < 0 ? 0 : k;  // -1 (vLLM) and 0 (HF) both mean off
  };
  t["min_p"] = [&s](const Json& v, const std::string& n) { s.min_p = read_float(v, n, {0, 1}); };
  t["frequency_penalty"] = [&s](const Json& v, const std::string& n) { s.frequency_penalty = read_float(v, n, {-2, 2}); };
  t["presence_penalty"] = [&s](const Json& v, const std::string& n) { s.presence_penalty = read_float(v, n, {-2, 2}); };
  t["repetition_penalty"] = [&s](const Json& v, const std::string& n) {
    s.repetition_penalty = read_float(v, n, {0, 10, true});
  };
  // Negative seeds are refused rather than wrapped: two different seeds must not draw alike.
  t["seed"] = [&s](const Json& v, const std::string& n) { s.seed = read_integer<uint64_t>(v, n, 0); };
  t["logit_bias"] = [&s](const Json& v, const std::string& n) { s.logit_bias = read_logit_bias(v, n); };
  t["stop"] = [&p](const Json& v, const std::string& n) { p.stop = read_stop(v, n); };
  t["stop_token_ids"] = [&p](const Json& v, const std::string& n) {
    p.stop_token_ids = read_token_ids(v, n);
    std::sort(p.stop_token_ids.begin(), p.stop_token_ids.end());  // the batcher searches them
    p.stop_token_ids.erase(std::unique(p.stop_token_ids.begin(), p.stop_token_ids.end()), p.stop_token_ids.end());
  };
  t["include_stop_str_in_output"] = [&p](const Json& v, const std::string& n) { p.include_stop = read_bool(v, n); };
  t["ignore_eos"] = [&p](const Json& v, const std::string& n) { p.ignore_eos = read_bool(v, n); };
  t["skip_special_tokens"] = [&p](const Json& v, const std::string& n) { p.skip_special_tokens = read_bool(v, n); };
  add_ignored_string(t, "user");
}

// `echo`: a completion's, which allows max_tokens 0 (the prompt scored, nothing generated);
// absent for a chat.
// ---- structured outputs ----

// Sets the request's one output constraint, refusing a second.
void constrain(GenerateParams& p, const std::string& param, OutputConstraint::Kind kind, std::string text,
               bool strict = false) {
  if (p.sampling.constraint.kind != OutputConstraint::Kind::none)
    refuse(param, param + " constrains the output, and so does " + p.constraint_param + ": give one of them");
  p.sampling.constraint = OutputConstraint{kind, std::move(text), strict};
  p.constraint_param = param;
}

// A schema given as a JSON object or as its text.
std::string schema_text(const Json& v, const Where& at) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() || v.is_boolean()) return v.dump();
  refuse(at, "must be a JSON schema (an object, or its text), got " + type_name(v));
}

std::string choice_text(const Json& v, const Where& at) {
  if (!v.is_array() || v.empty()) refuse(at, "must be a non-empty array of strings");
  for (size_t i = 0; i < v.size(); ++i) read_string(v[i], {at.param, element(at.label, i)});
  return v.dump();
}

void read_response_format(const Json& v, const std::string& n, GenerateParams& p) {
  const Json& format = read_object(v, n);
  if (!format.contains("type")) refuse(n, n + ".type is required");
  const std::string type = read_string(format["type"], {n, n + ".type"});
  for (const auto& [key, value] : format.items())
    if (key != "type" && !(type == "json_schema" && key == "json_schema"))
      refuse(n, "Unrecognized request argument supplied: " + n + "." + key);
  if (type == "text") return;
  if (type == "json_object") return constrain(p, n, OutputConstraint::Kind::json_object, "");
  if (type != "json_schema")
    refuse(n, n + ".type must be one of 'text', 'json_object', 'json_schema', got " + shown(format["type"]));
  if (!format.contains("json_schema")) refuse(n, n + ".json_schema is required for type 'json_schema'");
  const std::string at = n + ".json_schema";
  const Json& spec = read_object(format["json_schema"], {n, at});
  bool strict = false;
  for (const auto& [key, value] : spec.items()) {
    if (key == "name" || key == "description") {
      read_string(value, {n, at + "." + key});
    } else if (key == "strict") {
      if (!value.is_null()) strict = read_bool(value, {n, at + ".strict"});
    } else if (key != "schema") {
      refuse(n, "Unrecognized request argument supplied: " + at + "." + key);
    }
  }
  if (!spec.contains("name")) refuse(n, at + ".name is required");
  const std::string schema = spec.contains("schema") ? schema_text(spec["schema"], {n, at + ".schema"}) : "{}";
  constrain(p, n, OutputConstraint::Kind::json_schema, schema, strict);
}

void read_structured_outputs(const Json& v, const std::string& n, GenerateParams& p) {
  for (const auto& [key, value] : read_object(v, n).items()) {
    const std::string at = n + "." + key;
    if (value.is_null()) continue;
    if (key == "json") {
      constrain(p, n, OutputConstraint::Kind::json_schema, schema_text(value, {n, at}));
    } else if (key == "regex") {
      constrain(p, n, OutputConstraint::Kind::regex, read_string(value, {n, at}));
    } else if (key == "choice") {
      constrain(p, n, OutputConstraint::Kind::choice, choice_text(value, {n, at}));
    } else if (key == "grammar") {
      constrain(p, n, OutputConstraint::Kind::grammar, read_string(value, {n, at}));
    } else if (key == "json_object") {
      if (read_bool(value, {n, at})) constrain(p, n, OutputConstraint::Kind::json_object, "");
    } else if (key == "disable_fallback" || key == "disable_any_whitespace" || key == "disable_additional_properties") {
      read_bool(value, {n, at});
    } else {
      refuse(n, "Unrecognized request argument supplied: " + at);
    }
  }
}

void add_constraint_fields(FieldTable& t, GenerateParams& p) {
  t["response_format"] = [&p](const Json& v, const std::string& n) { read_response_format(v, n, p); };
  t["structured_outputs"] = [&p](const Json& v, const std::string& n) { read_structured_outputs(v, n, p); };
  t["guided_json"] = [&p](const Json& v, const std::string& n) {
    constrain(p, n, OutputConstraint::Kind::json_schema, schema_text(v, n));
  };
  t["json_schema"] = t["guided_json"];  // llama.cpp's
  t["guided_regex"] = [&p](const Json& v, const std::string& n) {
    constrain(p, n, OutputConstraint::Kind::regex, read_string(v, n));
  };
  t["guided_choice"] = [&p](const Json& v, const std::string& n) {
    constrain(p, n, OutputConstraint::Kind::choice, choice_text(v, n));
  };
  t["guided_grammar"] = [&p](const Json& v, const std::string& n) {
    constrain(p, n, OutputConstraint::Kind::grammar, read_string(v, n));
  };
  t["grammar"] = t["guided_grammar"];  // llama.cpp's
  t["guided_decoding_backend"] = [](const Json& v, const std::string& n) { read_string(v, n); };
  t["guided_whitespace_pattern"] = [](const Json&, const std::string& n) {
    unsupported(n, "orzo writes JSON with at most one space after ':' and ','");
  };
}

void finish_generate(const GenerateParams& p, const GenerateChecks& checks, std::optional<bool> echo = std::nullopt) {
  if (checks.stream_options && !p.stream) refuse("stream_options", "stream_options is only allowed when stream is true");
  if (p.max_tokens == 0 && !echo) refuse("max_tokens", "max_tokens must be at least 1, got 0");
  if (p.max_tokens == 0 && !*echo)
    refuse("max_tokens", "max_tokens must be at least 1 (0 only with echo, which scores the prompt alone)");
  // As vLLM: the prompt's logprobs come whole with the response, not in a stream.
  if (p.prompt_logprobs && p.stream) refuse("prompt_logprobs", "prompt_logprobs is not available with stream");
  if (checks.best_of && *checks.best_of != p.n) {
    unsupported("best_of", "only best_of equal to n (orzo returns every candidate, it does not rank them)");
  }
}

// ---- completions ----

std::vector<PromptInput> read_prompts(const Json& v, const std::string& name) {
  const auto text_prompt = [](const Json& s, const Where& at) {
    PromptInput prompt;
    prompt.text = read_string(s, at);
    if (prompt.text.empty()) refuse(at, "must not be empty");
    return prompt;
  };
  const auto ids_prompt = [](const Json& ids, const Where& at) {
    PromptInput prompt;
    prompt.ids = read_token_ids(ids, at);
    prompt.is_ids = true;
    if (prompt.ids.empty()) refuse(at, "must not be empty");
    return prompt;
  };
  if (v.is_string()) return {text_prompt(v, name)};
  if (!v.is_array()) refuse(name, name + " must be a string or an array, got " + type_name(v));
  if (v.empty()) refuse(name, name + " must not be empty");
  const Json& first = v.front();
  if (first.is_number()) return {ids_prompt(v, name)};
  if (!first.is_string() && !first.is_array()) {
    refuse(name, name + " must be a string, an array of strings, an array of token ids or an array of such arrays");
  }
  std::vector<PromptInput> prompts;
  for (const Json& item : v) {
    const Where at{name, element(name, prompts.size())};
    if (item.type() != first.type()) refuse(at, "must be " + type_name(first) + " like " + name + "[0]");
    prompts.push_back(first.is_string() ? text_prompt(item, at) : ids_prompt(item, at));
  }
  return prompts;
}

// ---- chat messages ----

constexpr const char* kRoles[] = {"system", "user", "assistant", "tool", "developer"};

// A content given as parts becomes the parts' texts joined by "\n", as vLLM does, so the
// template sees a plain string whichever way the client wrote it.
std::string read_content_parts(const Json& parts, const std::string& name) {
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string at = element(name, i);
    const Json& part = read_object(parts[i], at);
    const auto type = part.find("type");
    if (type == part.end()) refuse(at + ".type", at + ".type is required");
    const std::string kind = read_string(*type, at + ".type");
    if (kind != "text") unsupported(at + ".type", "content parts of type " + shown(*type) + " (only \"text\")");
    for (const auto& [key, value] : part.items()) {
      if (key != "type" && key != "text") refuse(at + "." + key, "Unrecognized request argument supplied: " + at + "." + key);
    }
    const auto part_text = part.find("text");
    if (part_text == part.end()) refuse(at + ".text", at + ".text is required");
    if (i > 0) text += '\n';
    text += read_string(*part_text, at + ".text");
  }
  return text;
}

// An assistant's earlier calls, each `arguments` JSON text turned into its object, as chat
// templates (and transformers) expect them; arguments that are no JSON stay the text.
Json read_tool_calls(const Json& v, const std::string& at) {
  read_array(v, at);
  Json calls = Json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string path = element(at, i);
    Json call = read_object(v[i], path);
    if (!call.contains("function") || !call["function"].is_object() || !call["function"].contains("name") ||
        !call["function"]["name"].is_string())
      refuse(path, path + ".function.name is required");
    if (call["function"].contains("arguments") && call["function"]["arguments"].is_string()) {
      if (auto args = try_parse_ordered_json(call["function"]["arguments"].get<std::string>()))
        call["function"]["arguments"] = std::move(*args);
    }
    calls.push_back(std::move(call));
  }
  return calls;
}

Json read_message(const Json& m, const std::string& at) {
  read_object(m, at);
  const auto role = m.find("role");
  if (role == m.end() || role->is_null()) refuse(at + ".role", at + ".role is required");
  const std::string role_name = read_string(*role, at + ".role");
  if (std::find(std::begin(kRoles), std::end(kRoles), role_name) == std::end(kRoles)) {
    refuse(at + ".role", at + ".role must be one of system, user, assistant, tool, developer; got " + shown(*role));
  }
  const bool assistant = role_name == "assistant";
  Json message = Json::object();
  message["role"] = role_name;
  message["content"] = nullptr;
  bool has_content = false;
  for (const auto& [key, value] : m.items()) {
    const std::string path = at + "." + key;
    if (key == "role") continue;
    if (key == "content") {
      has_content = !value.is_null();
      if (value.is_string()) {
        message["content"] = value;
      } else if (value.is_array()) {
        message["content"] = read_content_parts(value, path);
      } else if (!value.is_null()) {
        refuse(path, path + " must be a string or an array of text parts, got " + type_name(value));
      }
    } else if (key == "name" || key == "tool_call_id" || key == "reasoning_content" || key == "reasoning" ||
               key == "thinking") {
      if (!value.is_null()) message[key] = read_string(value, path);
    } else if (key == "tool_calls") {
      if (!value.is_null() && !(value.is_array() && value.empty())) {
        if (!assistant) refuse(path, path + " is only for assistant messages");
        message[key] = read_tool_calls(value, path);
      }
    } else if (key == "function_call") {
      if (!value.is_null()) unsupported(path, "use tool_calls");
    } else if (key == "refusal") {
      if (!value.is_null()) unsupported(path, "");
    } else {
      refuse(path, "Unrecognized request argument supplied: " + path);
    }
  }
  if (!has_content && !assistant) refuse(at + ".content", at + ".content is required for role " + role_name);
  return message;
}

Json read_messages(const Json& v, const std::string& name) {
  read_array(v, name);
  if (v.empty()) refuse(name, name + " must not be empty");
  Json messages = Json::array();
  for (size_t i = 0; i < v.size(); ++i) messages.push_back(read_message(v[i], element(name, i)));
  return messages;
}

// OpenAI's function names: letters, digits, '_' and '-', at most 64.
bool function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

Json read_tools(const Json& v, const std::string& n) {
  read_array(v, n);
  Json tools = Json::array();
  std::set<std::string> names;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = element(n, i);
    const Json& tool = read_object(v[i], {n, at});
    if (!tool.contains("type") || !tool["type"].is_string() || tool["type"] != "function")
      refuse(n, at + ".type must be \"function\"");
    if (!tool.contains("function")) refuse(n, at + ".function is required");
    const Json& f = read_object(tool["function"], {n, at + ".function"});
    for (const auto& [key, value] : f.items()) {
      const std::string path = at + ".function." + key;
      if (key == "name" || key == "description") {
        read_string(value, {n, path});
      } else if (key == "parameters") {
        if (!value.is_object()) refuse(n, path + " must be a JSON schema object");
      } else if (key == "strict") {
        if (!value.is_null()) read_bool(value, {n, path});
      } else {
        refuse(n, "Unrecognized request argument supplied: " + path);
      }
    }
    if (!f.contains("name") || !function_name(f["name"].get<std::string>()))
      refuse(n, at + ".function.name is required: letters, digits, '_' and '-', at most 64");
    if (!names.insert(f["name"].get<std::string>()).second) refuse(n, at + ".function.name repeats '" + f["name"].get<std::string>() + "'");
    for (const auto& [key, value] : tool.items())
      if (key != "type" && key != "function") refuse(n, "Unrecognized request argument supplied: " + at + "." + key);
    tools.push_back(tool);
  }
  return tools;
}

ToolChoice read_tool_choice(const Json& v, const std::string& n) {
  ToolChoice c;
  if (v.is_string()) {
    const std::string mode = v.get<std::string>();
    if (mode == "none") c.mode = ToolChoice::Mode::none;
    else if (mode == "auto") c.mode = ToolChoice::Mode::automatic;
    else if (mode == "required") c.mode = ToolChoice::Mode::required;
    else refuse(n, n + " must be \"none\", \"auto\", \"required\" or a named function, got " + shown(v));
    return c;
  }
  const Json& o = read_object(v, n);
  if (!o.contains("type") || o["type"] != "function" || !o.contains("function") || !o["function"].is_object() ||
      !o["function"].contains("name") || !o["function"]["name"].is_string())
    refuse(n, n + " must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
  c.mode = ToolChoice::Mode::named;
  c.name = o["function"]["name"].get<std::string>();
  return c;
}

// Chat tools. The deprecated functions/function_call are refused unless they ask for nothing.
void add_tool_fields(FieldTable& t, ChatRequest& r, bool& choice_given) {
  t["tools"] = [&r](const Json& v, const std::string& n) { r.tools = read_tools(v, n); };
  t["tool_choice"] = [&r, &choice_given](const Json& v, const std::string& n) {
    r.tool_choice = read_tool_choice(v, n);
    choice_given = true;
  };
  t["parallel_tool_calls"] = [&r](const Json& v, const std::string& n) { r.parallel_tool_calls = read_bool(v, n); };
  t["functions"] = [](const Json& v, const std::string& n) {
    if (!(v.is_array() && v.empty())) unsupported(n, "use tools");
  };
  t["function_call"] = [](const Json& v, const std::string& n) {
    if (!(v.is_string() && v.get_ref<const std::string&>() == "none")) unsupported(n, "use tool_choice");
  };
}

// The tool choice against the tools: a named function must be one of them, and nothing can
// be required of no tools.
void check_tool_choice(ChatRequest& r, bool choice_given) {
  if (!choice_given) r.tool_choice.mode = r.tools.empty() ? ToolChoice::Mode::none : ToolChoice::Mode::automatic;
  if (r.tool_choice.mode != ToolChoice::Mode::none && r.tools.empty())
    refuse("tool_choice", "tool_choice other than \"none\" needs tools");
  if (r.tool_choice.mode == ToolChoice::Mode::named) {
    bool found = false;
    for (const auto& tool : r.tools) found = found || tool["function"]["name"] == r.tool_choice.name;
    if (!found) refuse("tool_choice", "tool_choice names the function '" + r.tool_choice.name + "', which is not among the tools");
  }
}

}  // namespace

CompletionRequest parse_completion_request(std::string_view body) {
  const Json j = parse_object(body);
  CompletionRequest r;
  GenerateChecks checks;
  FieldTable t;
  add_generate_fields(t, r.params, checks);
  add_constraint_fields(t, r.params);
  t["prompt"] = [&r](const Json& v, const std::string& n) { r.prompts = read_prompts(v, n); };
  t["echo"] = [&r](const Json& v, const std::string& n) { r.echo = read_bool(v, n); };
  t["add_special_tokens"] = [&r](const Json& v, const std::string& n) { r.add_special_tokens = read_bool(v, n); };
  t["logprobs"] = [&r](const Json& v, const std::string& n) {
    r.params.sampling.logprobs = true;
    r.params.sampling.top_logprobs = read_integer<int32_t>(v, n, 0, kMaxTopLogprobs);
  };
  t["suffix"] = [](const Json&, const std::string& n) { unsupported(n, ""); };
  read_fields(j, t);
  require(j, "prompt");
  finish_generate(r.params, checks, r.echo);
  if (r.prompts.size() * static_cast<size_t>(r.params.n) > kMaxSequences) {
    refuse("prompt", std::to_string(r.prompts.size()) + " prompts x n = " + std::to_string(r.params.n) +
                         " asks for more than " + std::to_string(kMaxSequences) + " sequences in one request");
  }
  return r;
}

ChatRequest parse_chat_request(std::string_view body) {
  const Json j = parse_object(body);
  ChatRequest r;
  GenerateChecks checks;
  std::optional<int32_t> max_completion_tokens;
  FieldTable t;
  add_generate_fields(t, r.params, checks);
  add_constraint_fields(t, r.params);
  bool tool_choice_given = false;
  add_tool_fields(t, r, tool_choice_given);
  SamplingParams& s = r.params.sampling;
  t["messages"] = [&r](const Json& v, const std::string& n) { r.messages = read_messages(v, n); };
  t["max_completion_tokens"] = [&max_completion_tokens](const Json& v, const std::string& n) {
    max_completion_tokens = read_integer<int32_t>(v, n, 1);
  };
  t["logprobs"] = [&s](const Json& v, const std::string& n) { s.logprobs = read_bool(v, n); };
  t["top_logprobs"] = [&s](const Json& v, const std::string& n) {
    s.top_logprobs = read_integer<int32_t>(v, n, 0, kMaxTopLogprobs);
  };
  t["add_generation_prompt"] = [&r](const Json& v, const std::string& n) { r.add_generation_prompt = read_bool(v, n); };
  t["continue_final_message"] = [&r](const Json& v, const std::string& n) { r.continue_final_message = read_bool(v, n); };
  t["chat_template_kwargs"] = [&r](const Json& v, const std::string& n) { r.template_kwargs = read_object(v, n); };
  t["add_special_tokens"] = [&r](const Json& v, const std::string& n) { r.add_special_tokens = read_bool(v, n); };
  t["reasoning_effort"] = [](const Json&, const std::string& n) { unsupported(n, ""); };
  t["metadata"] = [](const Json& v, const std::string& n) { read_object(v, n); };
  t["store"] = [](const Json& v, const std::string& n) { read_bool(v, n); };
  add_ignored_string(t, "service_tier");
  read_fields(j, t);
  require(j, "messages");
  if (max_completion_tokens) {
    if (r.params.max_tokens && *r.params.max_tokens != *max_completion_tokens) {
      refuse("max_completion_tokens", "max_completion_tokens and max_tokens disagree; give one of them");
    }
    r.params.max_tokens = max_completion_tokens;
  }
  finish_generate(r.params, checks);
  if (s.top_logprobs > 0 && !s.logprobs) refuse("top_logprobs", "top_logprobs requires logprobs to be true");
  check_tool_choice(r, tool_choice_given);
  if (r.add_generation_prompt && r.continue_final_message) {
    refuse("continue_final_message", "continue_final_message requires add_generation_prompt to be false");
  }
  return r;
}

TokenizeRequest parse_tokenize_request(std::string_view body) {
  const Json j = parse_object(body);
  TokenizeRequest r;
  std::optional<bool> add_special_tokens;
  FieldTable t;
  t["model"] = [&r](const Json& v, const std::string& n) { r.model = read_string(v, n); };
  t["prompt"] = [&r](const Json& v, const std::string& n) { r.prompt = read_string(v, n); };
  t["messages"] = [&r](const Json& v, const std::string& n) { r.messages = read_messages(v, n); };
  t["add_special_tokens"] = [&add_special_tokens](const Json& v, const std::string& n) {
    add_special_tokens = read_bool(v, n);
  };
  t["add_generation_prompt"] = [&r](const Json& v, const std::string& n) { r.add_generation_prompt = read_bool(v, n); };
  t["tools"] = [&r](const Json& v, const std::string& n) { r.tools = read_tools(v, n); };
  read_fields(j, t);
  const bool has_messages = !r.messages.is_null();
  if (!r.tools.empty() && !has_messages) refuse("tools", "tools go with messages");
  if (r.prompt.has_value() == has_messages) refuse("prompt", "give exactly one of prompt and messages");
  // The chat template writes BOS itself, so messages default to no added special tokens.
  r.add_special_tokens = add_special_tokens.value_or(!has_messages);
  return r;
}

DetokenizeRequest parse_detokenize_request(std::string_view body) {
  const Json j = parse_object(body);
  DetokenizeRequest r;
  FieldTable t;
  t["model"] = [&r](const Json& v, const std::string& n) { r.model = read_string(v, n); };
  t["tokens"] = [&r](const Json& v, const std::string& n) { r.tokens = read_token_ids(v, n); };
  read_fields(j, t);
  require(j, "tokens");
  return r;
}

}  // namespace orzo
