#pragma once
// One POST /v1/completions or /v1/chat/completions in flight: its sessions (one per prompt
// and choice), and the HTTP answer they add up to. Session events are posted onto the
// exchange's strand, so the job's state has one thread at a time and no lock.
//
// The status line waits for the first event: a request the batcher refuses (queue full,
// too long, unhealthy) still gets its proper status (429, 400, 503) with an OpenAI error
// body, even when it asked for a stream. After that a stream reports a failing choice
// inside the stream, as an error event.

#include "actors/engine.hpp"
#include "server/http_server.hpp"
#include "server/openai_request.hpp"
#include "server/openai_response.hpp"
#include "server/tool_call_parser.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace orzo {

class ServerMetrics;

struct JobSetup {
  bool chat = false;
  ResponseHeader header;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;                  // choices carry logprobs
  int32_t top_logprobs = 0;               // with this many alternatives per token
  bool echo_logprobs = false;             // completions echo: the prompt's tokens lead each choice's logprobs
  std::optional<int32_t> prompt_logprobs;  // vLLM's prompt_logprobs: listed with this many alternatives
  int32_t n = 1;                          // choices per prompt
  std::vector<std::vector<int32_t>> prompts;  // per prompt, its ids
  std::optional<grammar::ToolCallFormat> tool_format;  // chat with tools: outputs are read for calls
  std::vector<std::string> echo;          // per prompt: text put before each of its choices (completions echo)
};

class CompletionJob : public std::enable_shared_from_this<CompletionJob> {
 public:
  CompletionJob(JobSetup setup, std::shared_ptr<HttpExchange> exchange, std::shared_ptr<ServerMetrics> metrics,
                std::shared_ptr<const Tokenizer> tokenizer, std::function<void(CompletionJob*)> on_end);

  // Starts one session per request, prompt by prompt, choice by choice, on the strand.
  // Safe from any thread; `engine` is used there, after this returns.
  void start(Engine& engine, std::vector<SessionRequest> requests);
  // Ends every session now (client gone, server shutting down). Safe from any thread.
  void cancel();

 private:
  struct Choice {
    std::string text;                      // all of it so far (echo included)
    int32_t chars = 0;                     // code points in `text`: logprobs' text_offset counts these
    std::vector<ChoiceLogprob> logprobs;
    std::vector<PromptTokenScore> prompt_scores;  // as the engine scored the prompt
    std::optional<ToolCallStream> tool_stream;    // streaming with tools: calls held back, sent whole
    int32_t tool_calls_sent = 0;
    bool first_chunk = true;
    bool done = false;
    Completion completion;
    std::chrono::steady_clock::time_point last_token;
    bool got_token = false;
  };

  void start_sessions(Engine& engine, std::vector<SessionRequest> requests);
  void on_text(size_t index, TextChunk& chunk);
  void on_done(size_t index, Completion& done);
  void fail_before_start(const Completion& done);
  void start_stream();
  void send_chunk(size_t index, ChoiceOutput out);
  // The prompt's scores as the request asked to see them (echo's logprobs, prompt_logprobs).
  void add_prompt_logprobs(size_t index, ChoiceOutput& out) const;
  // Calls read from a choice's output, numbered on from those it has sent.
  void add_tool_calls(Choice& c, std::vector<ParsedToolCall> calls, ChoiceOutput& out);
  const char* finish_reason(const Choice& c) const;
  void end();
  void report_generation();  // the request's tokens and TTFT, for the access log
  ResponseUsage usage() const;
  const DecodeTable* vocab() const;  // token bytes for logprobs

  JobSetup setup_;
  std::shared_ptr<HttpExchange> exchange_;  // until end(); cancel() may read it from any thread
  std::mutex exchange_mutex_;
  std::shared_ptr<ServerMetrics> metrics_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::function<void(CompletionJob*)> on_end_;
  std::vector<session_actor> sessions_;
  std::vector<Choice> choices_;
  std::chrono::steady_clock::time_point started_at_ = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> first_token_at_;  // of any choice
  size_t remaining_ = 0;
  bool streaming_ = false;  // the 200 and the stream's headers went out
  bool answered_ = false;   // an error status went out instead; later events change nothing
  uint64_t call_ids_;       // the next tool call's id, from a random start
};

// The HTTP status a refused or failed request gets.
int http_status(ErrorCode code);

}  // namespace orzo
