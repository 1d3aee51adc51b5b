#include "server/openai_response.hpp"

#include "server/json_text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <nlohmann/json.hpp>

namespace orzo {
namespace {

using Json = nlohmann::ordered_json;

// JSON has no infinity: a token the model rules out entirely gets -9999.0, as vLLM writes.
// Finite values go through the float's shortest decimal, so the dump reads -0.6931472
// rather than the float's binary expansion -0.6931471824645996.
double logprob_number(float logprob) {
  if (!std::isfinite(logprob)) return -9999.0;
  char text[32];
  const auto printed = std::to_chars(text, text + sizeof text, logprob);
  double value = 0;
  std::from_chars(text, printed.ptr, value);
  return value;
}

const std::string& token_text(const DecodeTable& vocab, int32_t id) {
  static const std::string kNone;
  return id >= 0 && static_cast<size_t>(id) < vocab.bytes.size() ? vocab.bytes[static_cast<size_t>(id)] : kNone;
}

Json token_bytes(const std::string& text) {
  Json bytes = Json::array();
  for (const char c : text) bytes.push_back(static_cast<uint8_t>(c));
  return bytes;
}

// Characters as Python counts them: UTF-8 lead bytes, continuation bytes excluded.
int32_t char_count(const std::string& text) {
  int32_t count = 0;
  for (const char c : text) count += (static_cast<uint8_t>(c) & 0xC0) != 0x80 ? 1 : 0;
  return count;
}

Json or_null(const std::optional<std::string>& s) { return s ? Json(*s) : Json(nullptr); }

Json usage_json(const ResponseUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

Json envelope(const ResponseHeader& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}

// The legacy completions shape: parallel arrays, top alternatives as {token: logprob}.
Json completion_logprobs(const ChoiceOutput& c, const DecodeTable* vocab) {
  if (!c.has_logprobs || vocab == nullptr) return nullptr;
  Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(),
       text_offset = Json::array();
  const auto list = [&](const std::vector<ChoiceLogprob>& entries, int32_t offset) {
    for (const ChoiceLogprob& t : entries) {
      const std::string& text = token_text(*vocab, t.token);
      tokens.push_back(text);
      text_offset.push_back(std::max(offset, 0));
      offset += char_count(text);
      if (!t.scored) {
        token_logprobs.push_back(nullptr);
        top_logprobs.push_back(nullptr);
        continue;
      }
      token_logprobs.push_back(logprob_number(t.logprob));
      Json top = Json::object();
      // Two ids can share a text; the first (likelier) one keeps the key.
      for (const auto& [id, logprob] : t.top) top.emplace(token_text(*vocab, id), logprob_number(logprob));
      top_logprobs.push_back(std::move(top));
    }
  };
  // The echo's tokens end where the generated ones begin: counted back from there, each
  // offset is where the token's text sits in the prompt (a BOS, absent from the text, gets 0).
  int32_t echo_chars = 0;
  for (const ChoiceLogprob& t : c.echo_logprobs) echo_chars += char_count(token_text(*vocab, t.token));
  list(c.echo_logprobs, c.text_offset - echo_chars);
  list(c.logprobs, c.text_offset);
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(text_offset)}};
}

Json prompt_logprobs_json(const std::vector<PromptTokenScore>& scores, const DecodeTable* vocab) {
  static const DecodeTable kNoVocab;
  const DecodeTable& table = vocab ? *vocab : kNoVocab;
  const auto entry = [&](int32_t id, float logprob, int32_t rank) {
    return Json{{"logprob", logprob_number(logprob)}, {"rank", rank}, {"decoded_token", token_text(table, id)}};
  };
  Json out = Json::array({nullptr});
  for (const PromptTokenScore& s : scores) {
    Json position = Json::object();
    position[std::to_string(s.token)] = entry(s.token, s.logprob.v, s.rank);
    for (size_t j = 0; j < s.top_logprobs.size(); ++j) {
      const TopLogprob& t = s.top_logprobs[j];
      if (t.token != s.token) position[std::to_string(t.token)] = entry(t.token, t.logprob.v, static_cast<int32_t>(j + 1));
    }
    out.push_back(std::move(position));
  }
  return out;
}

Json completion_choice(const ChoiceOutput& c, const DecodeTable* vocab) {
  Json choice = {{"index", c.index},
                 {"text", c.text},
                 {"logprobs", completion_logprobs(c, vocab)},
                 {"finish_reason", or_null(c.finish_reason)}};
  if (c.prompt_logprobs) choice["prompt_logprobs"] = prompt_logprobs_json(*c.prompt_logprobs, vocab);
  return choice;
}

Json chat_token(const DecodeTable& vocab, int32_t id, float logprob) {
  const std::string& text = token_text(vocab, id);
  return {{"token", text}, {"logprob", logprob_number(logprob)}, {"bytes", token_bytes(text)}};
}

Json chat_logprobs(const ChoiceOutput& c, const DecodeTable* vocab) {
  if (!c.has_logprobs || vocab == nullptr) return nullptr;
  Json content = Json::array();
  for (const ChoiceLogprob& t : c.logprobs) {
    Json entry = chat_token(*vocab, t.token, t.logprob);
    Json top = Json::array();
    for (const auto& [id, logprob] : t.top) top.push_back(chat_token(*vocab, id, logprob));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}};
}

Json tool_call_json(const ToolCallOutput& c, bool with_index) {
  Json out = Json::object();
  if (with_index) out["index"] = c.index;
  out["id"] = c.id;
  out["type"] = "function";
  out["function"] = {{"name", c.name}, {"arguments", c.arguments}};
  return out;
}

Json tool_calls_json(const std::vector<ToolCallOutput>& calls, bool with_index) {
  Json out = Json::array();
  for (const auto& c : calls) out.push_back(tool_call_json(c, with_index));
  return out;
}

}  // namespace

std::string completion_response(const ResponseHeader& h, const std::vector<ChoiceOutput>& choices,
                                const ResponseUsage& usage, const DecodeTable* vocab) {
  Json body = envelope(h, "text_completion");
  body["choices"] = Json::array();
  for (const ChoiceOutput& c : choices) body["choices"].push_back(completion_choice(c, vocab));
  body["usage"] = usage_json(usage);
  return json_text(body);
}

std::string completion_chunk(const ResponseHeader& h, const ChoiceOutput& choice, const DecodeTable* vocab) {
  Json body = envelope(h, "text_completion");
  body["choices"] = Json::array({completion_choice(choice, vocab)});
  return json_text(body);
}

std::string chat_response(const ResponseHeader& h, const std::vector<ChoiceOutput>& choices, const ResponseUsage& usage,
                          const DecodeTable* vocab) {
  Json body = envelope(h, "chat.completion");
  body["choices"] = Json::array();
  for (const ChoiceOutput& c : choices) {
    Json message = {{"role", "assistant"}, {"content", c.text}};
    if (!c.tool_calls.empty()) {
      if (c.text.empty()) message["content"] = nullptr;
      message["tool_calls"] = tool_calls_json(c.tool_calls, false);
    }
    body["choices"].push_back({{"index", c.index},
                               {"message", std::move(message)},
                               {"logprobs", chat_logprobs(c, vocab)},
                               {"finish_reason", or_null(c.finish_reason)}});
  }
  if (!choices.empty() && choices.front().prompt_logprobs)
    body["prompt_logprobs"] = prompt_logprobs_json(*choices.front().prompt_logprobs, vocab);
  body["usage"] = usage_json(usage);
  return json_text(body);
}

std::string chat_chunk(const ResponseHeader& h, const ChoiceOutput& choice, bool first, const DecodeTable* vocab) {
  Json delta = Json::object();
  if (first) delta["role"] = "assistant";
  if (first || !choice.text.empty()) delta["content"] = choice.text;
  if (!choice.tool_calls.empty()) delta["tool_calls"] = tool_calls_json(choice.tool_calls, true);
  Json body = envelope(h, "chat.completion.chunk");
  body["choices"] = Json::array({{{"index", choice.index},
                                  {"delta", std::move(delta)},
                                  {"logprobs", chat_logprobs(choice, vocab)},
                                  {"finish_reason", or_null(choice.finish_reason)}}});
  return json_text(body);
}

std::string usage_chunk(const ResponseHeader& h, bool chat, const ResponseUsage& usage) {
  Json body = envelope(h, chat ? "chat.completion.chunk" : "text_completion");
  body["choices"] = Json::array();
  body["usage"] = usage_json(usage);
  return json_text(body);
}

std::string sse_event(const std::string& json) { return "data: " + json + "\n\n"; }

}  // namespace orzo
