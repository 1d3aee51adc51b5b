#pragma once
// The JSON orzo answers with, shaped as OpenAI's: whole responses for stream=false, and the
// chunks of a Server-Sent-Events stream for stream=true. Pure formatting: the handler
// decides what goes in, these write it out. Strings are dumped with invalid UTF-8 replaced
// (a token's bytes may be part of a character), never throwing.

#include "protocol/prompt_scores.hpp"
#include "text/decode_table.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace orzo {

struct ResponseUsage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;
};

struct ChoiceLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // most likely first
  bool scored = true;  // false for a prompt's first token, which nothing precedes: null logprob and top
};

// A function the model called (chat): `index` orders the calls of a choice, as streamed
// deltas number them.
struct ToolCallOutput {
  int32_t index = 0;
  std::string id;         // "call_..."
  std::string name;
  std::string arguments;  // JSON text
};

// What one choice produced so far (a chunk) or in all (a whole response).
struct ChoiceOutput {
  int32_t index = 0;
  std::string text;
  std::vector<ChoiceLogprob> logprobs;     // empty unless asked for
  bool has_logprobs = false;              // asked for: write "logprobs": {...} even when empty
  // Completions echo with logprobs: the prompt's tokens, listed before `logprobs`; their
  // text_offsets end at text_offset, where the echo ends.
  std::vector<ChoiceLogprob> echo_logprobs;
  // vLLM's prompt_logprobs, when asked: null for the first token, then per prompt token
  // {id: {logprob, rank, decoded_token}} for the token and its alternatives (cut to the count
  // asked). Chat writes the first choice's at the top level, as vLLM does.
  std::optional<std::vector<PromptTokenScore>> prompt_logprobs;
  // Chat: calls read from the output (the message's tool_calls; a chunk's, whole, in its delta).
  std::vector<ToolCallOutput> tool_calls;
  // Completions logprobs: where `text` starts in the choice's whole text, in characters
  // (Unicode code points, as OpenAI and Python count); each token's text_offset follows on.
  int32_t text_offset = 0;
  // Null until the last chunk; then as OpenAI names it: "stop" (EOS, stop token or string),
  // "tool_calls" (it ended calling functions), "length", "abort" (cancelled), "error".
  std::optional<std::string> finish_reason;
};

struct ResponseHeader {
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// The vocabulary's bytes per token turn ids into the "token" strings and "bytes" arrays of
// logprobs (ids outside it read as ""); null when no logprobs are written. A logprob of
// -inf, which JSON cannot write, is written as -9999.0, as vLLM does.
std::string completion_response(const ResponseHeader& h, const std::vector<ChoiceOutput>& choices,
                                const ResponseUsage& usage, const DecodeTable* vocab);
std::string completion_chunk(const ResponseHeader& h, const ChoiceOutput& choice, const DecodeTable* vocab);

std::string chat_response(const ResponseHeader& h, const std::vector<ChoiceOutput>& choices, const ResponseUsage& usage,
                          const DecodeTable* vocab);
// first: the choice's first chunk, whose delta carries "role": "assistant".
std::string chat_chunk(const ResponseHeader& h, const ChoiceOutput& choice, bool first, const DecodeTable* vocab);

// The last chunk of a stream with stream_options.include_usage: "choices": [] and the usage.
std::string usage_chunk(const ResponseHeader& h, bool chat, const ResponseUsage& usage);

// One SSE event: "data: " + json + "\n\n"; and the stream's end, "data: [DONE]\n\n".
std::string sse_event(const std::string& json);
inline const char* sse_done() { return "data: [DONE]\n\n"; }

}  // namespace orzo
