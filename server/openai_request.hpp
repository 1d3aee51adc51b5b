#pragma once
// The bodies of POST /v1/completions, /v1/chat/completions, /tokenize and /detokenize,
// parsed and checked field by field into plain structs. Nothing here knows HTTP or actors:
// a request is valid or an ApiError (status 400, naming the field) says why not.
//
// Checked here: JSON syntax and types, each field's range as the OpenAI API gives it, and the
// combinations of fields that are wrong before anything is tokenized. What needs the prompt's
// length or the model's limits (the context, the vocabulary, min_tokens against the max_tokens
// a chat defaults to, what the sampler can run) is check_request's
// (protocol/generation_request.hpp), applied to every client once the prompt is ids.
//
// Field names, types, ranges and defaults follow the OpenAI API, plus the extensions vLLM
// users rely on (top_k, min_p, repetition_penalty, min_tokens, ignore_eos, stop_token_ids,
// include_stop_str_in_output, skip_special_tokens, add_special_tokens, prompt_logprobs). A
// request without `model` asks for the served model, as vLLM and llama.cpp's server take it. Unknown fields are
// refused, as OpenAI does, so a misspelt parameter is not silently ignored; fields a client
// library sends that change nothing (user, metadata, ...) are accepted. Fields whose meaning
// orzo does not implement (functions/function_call, best_of > n, suffix, ...) are refused by
// name rather than ignored.
//
// Structured outputs, one per request (a second is refused by name): `response_format` (text,
// json_object, json_schema with its schema and strict) on both endpoints; vLLM's
// `structured_outputs` (json, regex, choice, grammar, json_object) and its older
// `guided_json`, `guided_regex`, `guided_choice`, `guided_grammar`; llama.cpp's `grammar`
// and `json_schema`. Whether the schema, pattern or grammar compiles is the handler's check
// (grammar/constraint.hpp), which names the field.

#include "core/sampling_params.hpp"
#include "server/api_error.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace orzo {

// One prompt of /v1/completions: text, or token ids given directly.
struct PromptInput {
  std::string text;
  std::vector<int32_t> ids;
  bool is_ids = false;
};

struct GenerateParams {
  std::string model;                       // as given, empty when absent (the served model); the handler checks it
  int32_t n = 1;                           // choices per prompt, 1..128
  bool stream = false;
  bool include_usage = false;              // stream_options.include_usage
  std::optional<int32_t> max_tokens;       // absent: completions 16, chat up to the context; 0: echo only
  std::optional<int32_t> prompt_logprobs;  // vLLM's: the response lists the prompt's logprobs, this many alternatives
  int32_t min_tokens = 0;
  SamplingParams sampling;                 // temperature, top_p, top_k, min_p, penalties, logit_bias, seed, logprobs
  std::vector<std::string> stop;           // at most 16, none empty
  std::vector<int32_t> stop_token_ids;
  bool include_stop = false;               // include_stop_str_in_output
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  // sampling.constraint came from this field (response_format, structured_outputs.json,
  // guided_regex, grammar, json_schema, ...): a constraint that does not compile is its 400.
  std::string constraint_param;
};

struct CompletionRequest {
  GenerateParams params;
  std::vector<PromptInput> prompts;        // one or more, none empty; with n, 256 sequences at most
  bool echo = false;
  std::optional<bool> add_special_tokens;  // absent: true
};

// Which tools a chat may call: OpenAI's tool_choice.
struct ToolChoice {
  enum class Mode { none, automatic, required, named } mode = Mode::none;
  std::string name;  // named: the function
};

struct ChatRequest {
  GenerateParams params;
  // [{type: function, function: {name, description, parameters}}], as given (the template
  // renders them); tool_choice defaults to auto when there are tools, none otherwise.
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  // Array of {role, content, [name, tool_call_id, tool_calls, reasoning_content, ...]}: content
  // is a string (text parts joined by "\n") or null (assistant only); keys given as null are
  // dropped; an assistant's tool_calls keep OpenAI's shape with each `arguments` JSON text
  // turned into its object, as templates (and transformers) expect.
  nlohmann::ordered_json messages;
  bool add_generation_prompt = true;
  bool continue_final_message = false;     // mutually exclusive with add_generation_prompt
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
  bool add_special_tokens = false;         // the template writes BOS itself
};

struct TokenizeRequest {
  std::string model;                       // optional; empty when absent
  std::optional<std::string> prompt;       // either prompt ...
  nlohmann::ordered_json messages;         // ... or messages (through the chat template); null when absent
  bool add_special_tokens = true;          // absent: true for a prompt, false for messages (the template writes BOS)
  bool add_generation_prompt = true;
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // rendered by the chat template, as in a chat
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

// Each throws ApiError (400, type invalid_request_error, param = the field) on malformed
// JSON, a wrong type, an out-of-range value, an unknown or unsupported field. A null field
// means its default. Within messages, param is the path ("messages[2].content[0].type").
// JSON nested deeper than 64 levels is refused as malformed: templates and copies recurse.
CompletionRequest parse_completion_request(std::string_view body);
ChatRequest parse_chat_request(std::string_view body);
TokenizeRequest parse_tokenize_request(std::string_view body);
DetokenizeRequest parse_detokenize_request(std::string_view body);

}  // namespace orzo
