// libFuzzer entry point for the OpenAI request parsers: the input is given as a body to all
// four. Each must return a request or throw ApiError (400, whose error body can be written);
// anything else escapes and is a finding. What parses must hold the parsers' promises: every
// field in its range, sampling the sampler can run, no empty prompt or stop, messages the
// chat template can take.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/api_error.hpp"
#include "server/openai_request.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void check_sampling(const orzo::SamplingParams& s) {
  check(s.temperature >= 0 && s.temperature <= 2);
  check(s.top_p > 0 && s.top_p <= 1);
  check(s.top_k >= 0);
  check(s.min_p >= 0 && s.min_p <= 1);
  check(s.frequency_penalty >= -2 && s.frequency_penalty <= 2);
  check(s.presence_penalty >= -2 && s.presence_penalty <= 2);
  check(s.repetition_penalty > 0 && s.repetition_penalty <= 10);
  check(s.top_logprobs >= 0 && s.top_logprobs <= orzo::kMaxTopLogprobs);
  check(!orzo::sampling_problem(s));  // the API's ranges lie inside what the sampler runs
  for (size_t i = 0; i < s.logit_bias.size(); ++i) {
    check(s.logit_bias[i].first >= 0);
    check(s.logit_bias[i].second >= -100 && s.logit_bias[i].second <= 100);
    for (size_t j = 0; j < i; ++j) check(s.logit_bias[j].first != s.logit_bias[i].first);
  }
}

// `echo`: a completion's; a chat has none and never allows max_tokens 0.
void check_generate(const orzo::GenerateParams& p, bool echo = false) {
  check(p.n >= 1 && p.n <= 128);
  check(!p.include_usage || p.stream);
  check(!p.max_tokens || *p.max_tokens >= (echo ? 0 : 1));
  check(!p.prompt_logprobs || (*p.prompt_logprobs >= 0 && *p.prompt_logprobs <= orzo::kMaxTopLogprobs));
  check(!p.prompt_logprobs || !p.stream);
  check(p.min_tokens >= 0);
  check(p.stop.size() <= 16);
  for (const std::string& s : p.stop) check(!s.empty());
  for (const int32_t id : p.stop_token_ids) check(id >= 0);
  check_sampling(p.sampling);
}

// What the chat template is handed: role and content always there, content text or (for the
// assistant) null, and all of it valid UTF-8 (dumping strictly throws otherwise).
void check_messages(const nlohmann::ordered_json& messages) {
  check(messages.is_array() && !messages.empty());
  for (const auto& m : messages) {
    check(m.is_object() && m.contains("role") && m.contains("content"));
    const std::string role = m["role"].get<std::string>();
    check(m["content"].is_string() || (m["content"].is_null() && role == "assistant"));
    for (const auto& item : m.items()) check(item.key() == "content" || item.value().is_string());
  }
  (void)messages.dump();
}

template <class Parse, class Check>
void run(Parse parse, Check check_request, std::string_view body) {
  try {
    check_request(parse(body));
  } catch (const orzo::ApiError& e) {
    check(e.status == 400);
    (void)orzo::error_body(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  run(orzo::parse_completion_request,
      [](const orzo::CompletionRequest& r) {
        check_generate(r.params, r.echo);
        check(!r.prompts.empty() && r.prompts.size() * static_cast<size_t>(r.params.n) <= 256);
        for (const orzo::PromptInput& p : r.prompts) {
          check(p.is_ids ? !p.ids.empty() && p.text.empty() : !p.text.empty() && p.ids.empty());
          check(std::all_of(p.ids.begin(), p.ids.end(), [](int32_t id) { return id >= 0; }));
        }
      },
      body);
  run(orzo::parse_chat_request,
      [](const orzo::ChatRequest& r) {
        check_generate(r.params);
        check_messages(r.messages);
        check(!(r.add_generation_prompt && r.continue_final_message));
        check(r.template_kwargs.is_object());
        check(r.params.sampling.top_logprobs == 0 || r.params.sampling.logprobs);
        check(r.tool_choice.mode == orzo::ToolChoice::Mode::none || !r.tools.empty());
        if (r.tool_choice.mode == orzo::ToolChoice::Mode::named) {
          bool offered = false;
          for (const auto& tool : r.tools) offered = offered || tool["function"]["name"] == r.tool_choice.name;
          check(offered);
        }
        (void)r.template_kwargs.dump();
      },
      body);
  run(orzo::parse_tokenize_request,
      [](const orzo::TokenizeRequest& r) {
        check(r.prompt.has_value() != !r.messages.is_null());
        if (!r.messages.is_null()) check_messages(r.messages);
      },
      body);
  run(orzo::parse_detokenize_request,
      [](const orzo::DetokenizeRequest& r) {
        check(std::all_of(r.tokens.begin(), r.tokens.end(), [](int32_t id) { return id >= 0; }));
      },
      body);
  return 0;
}
