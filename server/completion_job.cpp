#include "server/completion_job.hpp"

#include "server/api_error.hpp"
#include "server/metrics.hpp"
#include "text/tokenizer/tokenizer.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <iterator>
#include <random>
#include <utility>

namespace orzo {
namespace {

int32_t code_points(const std::string& utf8) {
  int32_t n = 0;
  for (unsigned char b : utf8) n += (b & 0xC0) != 0x80;
  return n;
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::eos:
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "abort";
    case FinishReason::error: return "error";
  }
  return "error";
}

ApiError api_error(const Completion& done) {
  const int status = http_status(done.error);
  switch (status) {
    case 429: return ApiError(status, done.message, "rate_limit_error", {}, "rate_limit_exceeded");
    case 400: return ApiError(status, done.message, "invalid_request_error");
    case 503: return ApiError(status, done.message, "server_error", {}, "unavailable");
    default: return ApiError(status, done.message, "server_error", {}, to_string(done.error));
  }
}

}  // namespace

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::overloaded: return 429;
    case ErrorCode::invalid_request: return 400;
    case ErrorCode::unavailable: return 503;
    default: return 500;
  }
}

CompletionJob::CompletionJob(JobSetup setup, std::shared_ptr<HttpExchange> exchange, std::shared_ptr<ServerMetrics> metrics,
                             std::shared_ptr<const Tokenizer> tokenizer, std::function<void(CompletionJob*)> on_end)
    : setup_(std::move(setup)), exchange_(std::move(exchange)), metrics_(std::move(metrics)), tokenizer_(std::move(tokenizer)),
      on_end_(std::move(on_end)), call_ids_((static_cast<uint64_t>(std::random_device{}()) << 32) | std::random_device{}()) {}

void CompletionJob::start(Engine& engine, std::vector<SessionRequest> requests) {
  // The caller is a work thread (a request with a body is prepared there), but the job's
  // state is the strand's: an early session's end, handled there, reads sessions_ while
  // later sessions would still be pushed onto it.
  exchange_->post([self = shared_from_this(), &engine, requests = std::move(requests)]() mutable {
    self->start_sessions(engine, std::move(requests));
  });
}

void CompletionJob::start_sessions(Engine& engine, std::vector<SessionRequest> requests) {
  choices_.resize(requests.size());
  remaining_ = requests.size();
  for (size_t i = 0; i < requests.size(); ++i) {
    choices_[i].text = setup_.echo.at(i / static_cast<size_t>(setup_.n));
    choices_[i].chars = code_points(choices_[i].text);
    if (setup_.tool_format && setup_.stream) choices_[i].tool_stream.emplace(*setup_.tool_format);
  }
  // The job lives while any session can still call back.
  auto self = shared_from_this();
  exchange_->on_disconnect([weak = std::weak_ptr<CompletionJob>(self)] {
    if (auto job = weak.lock()) job->cancel();
  });
  for (size_t i = 0; i < requests.size(); ++i) {
    SessionCallbacks callbacks;
    callbacks.on_text = [self, i](TextChunk& chunk) {
      self->exchange_->post([self, i, chunk = std::move(chunk)]() mutable { self->on_text(i, chunk); });
    };
    callbacks.on_done = [self, i](Completion& done) {
      self->exchange_->post([self, i, done = std::move(done)]() mutable { self->on_done(i, done); });
    };
    sessions_.push_back(engine.generate(std::move(requests[i]), std::move(callbacks)));
  }
}

void CompletionJob::cancel() {
  std::shared_ptr<HttpExchange> exchange;
  {
    std::lock_guard<std::mutex> lock(exchange_mutex_);
    exchange = exchange_;
  }
  if (!exchange) return;  // ended
  exchange->post([self = shared_from_this()] {
    for (size_t i = 0; i < self->sessions_.size(); ++i)
      if (!self->choices_[i].done) caf::anon_send(self->sessions_[i], cancel_atom::value);
  });
}

void CompletionJob::on_text(size_t index, TextChunk& chunk) {
  auto& c = choices_[index];
  // They come before any token, and go out with the choice's first chunk or whole answer.
  c.prompt_scores.insert(c.prompt_scores.end(), std::make_move_iterator(chunk.prompt_scores.begin()),
                         std::make_move_iterator(chunk.prompt_scores.end()));
  if (chunk.tokens.empty() && chunk.text.empty()) return;
  if (!chunk.tokens.empty()) {
    const auto now = std::chrono::steady_clock::now();
    if (c.got_token)
      metrics_->observe_inter_token_latency(seconds(now - c.last_token));
    else
      metrics_->observe_time_to_first_token(seconds(now - started_at_));
    c.last_token = now;
    c.got_token = true;
    if (!first_token_at_) first_token_at_ = now;
  }
  if (answered_) return;
  ChoiceOutput out;
  out.index = static_cast<int32_t>(index);
  out.has_logprobs = setup_.logprobs;
  out.text_offset = c.chars;
  if (setup_.logprobs)
    for (size_t t = 0; t < chunk.tokens.size(); ++t) {
      ChoiceLogprob lp{chunk.tokens[t], t < chunk.logprobs.size() ? chunk.logprobs[t].v : 0.0f, {}};
      if (t < chunk.top_logprobs.size())
        for (const auto& top : chunk.top_logprobs[t]) lp.top.emplace_back(top.token, top.logprob.v);
      out.logprobs.push_back(std::move(lp));
    }
  c.text += chunk.text;
  c.chars += code_points(chunk.text);
  if (!setup_.stream) {
    c.logprobs.insert(c.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
    return;
  }
  // The echo goes out with the choice's first chunk.
  out.text = c.first_chunk ? c.text : chunk.text;
  if (c.tool_stream) {
    ToolCallSplit split = c.tool_stream->feed(chunk.text);
    out.text = std::move(split.content);
    add_tool_calls(c, std::move(split.calls), out);
  }
  if (c.first_chunk) add_prompt_logprobs(index, out);
  if (out.text.empty() && out.logprobs.empty() && out.tool_calls.empty()) return;
  start_stream();
  send_chunk(index, std::move(out));
}

void CompletionJob::on_done(size_t index, Completion& done) {
  auto& c = choices_[index];
  c.done = true;
  --remaining_;
  const auto now = std::chrono::steady_clock::now();
  metrics_->observe_e2e_latency(seconds(now - started_at_));
  if (done.usage.generated_tokens > 0) metrics_->observe_queue_time(static_cast<double>(done.usage.queue_us) * 1e-6);
  metrics_->count_finished(finish_reason_name(done.reason));
  c.completion = std::move(done);
  const Completion& result = c.completion;
  if (!answered_ && !streaming_ && result.reason == FinishReason::error) fail_before_start(result);
  if (answered_) {
    if (remaining_ == 0) end();
    return;
  }
  if (setup_.stream) {
    start_stream();
    if (result.reason == FinishReason::error) exchange_->write(sse_event(error_body(api_error(result))));
    ChoiceOutput last;
    last.index = static_cast<int32_t>(index);
    last.text_offset = c.chars;
    if (c.first_chunk) {  // an echo with nothing generated after it
      last.text = c.text;
      last.has_logprobs = setup_.logprobs;
      add_prompt_logprobs(index, last);
    }
    if (c.tool_stream) {  // what was held back: a call cut short, or text that looked like one
      ToolCallSplit rest = c.tool_stream->finish();
      last.text = std::move(rest.content);
      add_tool_calls(c, std::move(rest.calls), last);
    }
    last.finish_reason = finish_reason(c);
    send_chunk(index, std::move(last));
    if (remaining_ > 0) return;
    if (setup_.include_usage) exchange_->write(sse_event(usage_chunk(setup_.header, setup_.chat, usage())));
    exchange_->write(sse_done());
    report_generation();
    exchange_->finish();
    return end();
  }
  if (remaining_ > 0) return;
  std::vector<ChoiceOutput> outs;
  for (size_t i = 0; i < choices_.size(); ++i) {
    ChoiceOutput out;
    out.index = static_cast<int32_t>(i);
    out.text = std::move(choices_[i].text);
    out.has_logprobs = setup_.logprobs;
    out.logprobs = std::move(choices_[i].logprobs);
    out.text_offset = code_points(setup_.echo.at(i / static_cast<size_t>(setup_.n)));
    add_prompt_logprobs(i, out);
    if (setup_.tool_format) {
      ToolCallSplit split = split_tool_calls(*setup_.tool_format, out.text);
      out.text = std::move(split.content);
      add_tool_calls(choices_[i], std::move(split.calls), out);
    }
    out.finish_reason = finish_reason(choices_[i]);
    outs.push_back(std::move(out));
  }
  report_generation();
  exchange_->respond(200, setup_.chat ? chat_response(setup_.header, outs, usage(), vocab())
                                      : completion_response(setup_.header, outs, usage(), vocab()));
  end();
}

void CompletionJob::fail_before_start(const Completion& done) {
  answered_ = true;
  const ApiError error = api_error(done);
  metrics_->count_rejected(error.status);
  HttpHeaders headers;
  if (error.status == 429) headers.emplace_back("Retry-After", "1");
  report_generation();
  exchange_->respond(error.status, error_body(error), std::move(headers));
  for (size_t i = 0; i < sessions_.size(); ++i)
    if (!choices_[i].done) caf::anon_send(sessions_[i], cancel_atom::value);
}

void CompletionJob::start_stream() {
  if (streaming_) return;
  streaming_ = true;
  exchange_->start_stream();
  // A reader that falls behind pauses its choices rather than have the server buffer their
  // output: credit flows back from the socket to the batcher, and a stalled client costs a
  // bounded buffer and no KV.
  exchange_->on_backlog([weak = weak_from_this()](bool stalled) {
    auto self = weak.lock();
    if (!self) return;
    for (size_t i = 0; i < self->sessions_.size(); ++i) {
      if (self->choices_[i].done) continue;
      if (stalled)
        caf::anon_send(self->sessions_[i], pause_atom::value);
      else
        caf::anon_send(self->sessions_[i], resume_atom::value);
    }
  });
}

void CompletionJob::send_chunk(size_t index, ChoiceOutput out) {
  auto& c = choices_[index];
  exchange_->write(sse_event(setup_.chat ? chat_chunk(setup_.header, out, c.first_chunk, vocab())
                                         : completion_chunk(setup_.header, out, vocab())));
  c.first_chunk = false;
}

void CompletionJob::add_tool_calls(Choice& c, std::vector<ParsedToolCall> calls, ChoiceOutput& out) {
  static const char* hex = "0123456789abcdef";
  for (auto& call : calls) {
    std::string id = "call_";
    for (uint64_t v = call_ids_++, k = 0; k < 16; ++k, v >>= 4) id += hex[v & 0xF];
    out.tool_calls.push_back(ToolCallOutput{c.tool_calls_sent++, std::move(id), std::move(call.name), std::move(call.arguments)});
  }
}

// "tool_calls" for an output that ended (not cut short) calling functions.
const char* CompletionJob::finish_reason(const Choice& c) const {
  const FinishReason reason = c.completion.reason;
  if (c.tool_calls_sent > 0 && (reason == FinishReason::eos || reason == FinishReason::stop)) return "tool_calls";
  return finish_reason_name(reason);
}

void CompletionJob::add_prompt_logprobs(size_t index, ChoiceOutput& out) const {
  const auto& scores = choices_[index].prompt_scores;
  const auto& prompt = setup_.prompts.at(index / static_cast<size_t>(setup_.n));
  const auto cut = [](std::vector<TopLogprob> top, int32_t k) {
    top.resize(std::min(top.size(), static_cast<size_t>(std::max(k, 0))));
    return top;
  };
  if (setup_.echo_logprobs && !prompt.empty()) {
    out.echo_logprobs.push_back(ChoiceLogprob{prompt.front(), 0.0f, {}, false});
    for (const auto& s : scores) {
      ChoiceLogprob lp{s.token, s.logprob.v, {}};
      for (const auto& t : cut(s.top_logprobs, setup_.top_logprobs)) lp.top.emplace_back(t.token, t.logprob.v);
      out.echo_logprobs.push_back(std::move(lp));
    }
  }
  if (setup_.prompt_logprobs) {
    out.prompt_logprobs.emplace();
    for (const auto& s : scores) {
      PromptTokenScore shown = s;
      shown.top_logprobs = cut(s.top_logprobs, *setup_.prompt_logprobs);
      out.prompt_logprobs->push_back(std::move(shown));
    }
  }
}

const DecodeTable* CompletionJob::vocab() const { return tokenizer_ ? &tokenizer_->decode_table() : nullptr; }

void CompletionJob::report_generation() {
  const ResponseUsage u = usage();
  AccessRecord::Generation g;
  g.prompt_tokens = u.prompt_tokens;
  g.completion_tokens = u.completion_tokens;
  if (first_token_at_) g.ttft_seconds = seconds(*first_token_at_ - started_at_);
  exchange_->report_generation(std::move(g));
}

ResponseUsage CompletionJob::usage() const {
  ResponseUsage u;
  for (const auto& p : setup_.prompts) u.prompt_tokens += static_cast<int32_t>(p.size());
  for (size_t i = 0; i < choices_.size(); ++i) {
    const auto& usage = choices_[i].completion.usage;
    u.completion_tokens += usage.generated_tokens;
    // A prompt counts once, however many choices share it; so do its cached tokens.
    if (i % static_cast<size_t>(setup_.n) == 0) u.cached_tokens += usage.cached_tokens;
  }
  return u;
}

void CompletionJob::end() {
  if (auto on_end = std::move(on_end_)) on_end(this);
  on_end_ = nullptr;
  // Sessions hold the job until their actors are gone, which CAF may finish after the server
  // and its io_context: by then the job must no longer hold the connection, whose timers need
  // that io_context to be destroyed.
  std::lock_guard<std::mutex> lock(exchange_mutex_);
  exchange_.reset();
}

}  // namespace orzo
