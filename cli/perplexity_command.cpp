#include "cli/perplexity_command.hpp"

#include "actors/engine.hpp"
#include "actors/system_config.hpp"
#include "cli/engine_flags.hpp"
#include "core/read_file.hpp"
#include "runtime/perplexity_windows.hpp"

#include <CLI/CLI.hpp>
#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace orzo::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct PerplexityFlags {
  EngineFlags engine;
  std::string file;
  int64_t ctx = 0;     // 0: the model's context length
  int64_t stride = 0;  // 0: the window
  bool no_special = false;
};

// What the windows' sessions report, from the actor threads.
struct Tally {
  std::mutex mutex;
  std::condition_variable changed;
  double logprob_sum = 0;
  int64_t scored = 0;
  size_t finished = 0;
  std::string error;  // the first window that failed
};

void draw_progress(int64_t done, int64_t total, double elapsed) {
  constexpr int kWidth = 40;
  const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
  std::fprintf(stderr, "\r[%s%s] %lld/%lld tokens, %.0f tokens/s", std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(kWidth - filled), '.').c_str(), static_cast<long long>(done),
               static_cast<long long>(total), elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0);
  std::fflush(stderr);
}

int run_perplexity(PerplexityFlags& flags) {
  const std::string text = read_file(flags.file);
  caf::actor_system_config cfg;
  configure_actor_system(cfg, flags.engine.process_threads());
  caf::actor_system sys{cfg};
  auto engine = Engine::start(sys, flags.engine.engine_options());
  const std::vector<int32_t> ids = engine->tokenize(text, !flags.no_special);
  const int64_t ctx = flags.ctx > 0 ? flags.ctx : engine->bounds().max_model_len;
  const int64_t stride = flags.stride > 0 ? flags.stride : ctx;
  if (ctx > engine->bounds().max_model_len)
    throw std::invalid_argument("--ctx " + std::to_string(ctx) + " exceeds the model's context length " +
                                std::to_string(engine->bounds().max_model_len) + " (see --max-model-len)");
  const auto windows = scoring_windows(static_cast<int64_t>(ids.size()), ctx, stride);
  int64_t to_score = 0;
  for (const auto& win : windows) to_score += win.end - win.first_scored;

  // Windows go to the batcher as concurrent requests, enough at a time to fill its steps.
  Tally tally;
  const auto start = Clock::now();
  const auto submit = [&](size_t w) {
    const ScoringWindow win = windows[w];
    SessionRequest request;
    request.id = "window-" + std::to_string(w);
    request.prompt_ids.assign(ids.begin() + win.begin, ids.begin() + win.end);
    request.sampling.temperature = 0;
    request.sampling.prompt_logprobs = 0;
    request.limits.max_tokens = 0;
    SessionCallbacks callbacks;
    callbacks.on_text = [&tally, win](TextChunk& chunk) {
      double sum = 0;
      int64_t n = 0;
      for (const auto& s : chunk.prompt_scores)
        if (win.begin + s.position >= win.first_scored) {
          sum += s.logprob.v;
          ++n;
        }
      std::lock_guard<std::mutex> lock(tally.mutex);
      tally.logprob_sum += sum;
      tally.scored += n;
    };
    callbacks.on_done = [&tally, w](Completion& done) {
      std::lock_guard<std::mutex> lock(tally.mutex);
      if (done.reason == FinishReason::error && tally.error.empty())
        tally.error = "window " + std::to_string(w) + ": " + to_string(done.error) + ": " + done.message;
      ++tally.finished;
      tally.changed.notify_all();
    };
    engine->generate(std::move(request), std::move(callbacks));
  };
  const size_t in_flight = static_cast<size_t>(std::max(flags.engine.engine.scheduler.max_num_seqs, 1));
  const bool bar = isatty(STDERR_FILENO) != 0;
  size_t submitted = 0;
  std::unique_lock<std::mutex> lock(tally.mutex);
  while (tally.finished < windows.size()) {
    while (submitted < windows.size() && submitted - tally.finished < in_flight && tally.error.empty()) {
      lock.unlock();
      submit(submitted++);
      lock.lock();
    }
    if (!tally.error.empty() && tally.finished == submitted) break;
    tally.changed.wait_for(lock, std::chrono::milliseconds(200));
    if (bar) draw_progress(tally.scored, to_score, std::chrono::duration<double>(Clock::now() - start).count());
  }
  lock.unlock();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (bar) {
    draw_progress(tally.scored, to_score, seconds);
    std::fputc('\n', stderr);
  }
  engine->shutdown();
  if (!tally.error.empty()) throw std::runtime_error(tally.error);
  if (tally.scored != to_score)
    throw std::runtime_error("scored " + std::to_string(tally.scored) + " of " + std::to_string(to_score) + " tokens");
  const double ppl = std::exp(-tally.logprob_sum / static_cast<double>(tally.scored));
  std::printf("perplexity %.6f over %lld tokens (%zu windows of up to %lld tokens, stride %lld)\n", ppl,
              static_cast<long long>(tally.scored), windows.size(), static_cast<long long>(ctx),
              static_cast<long long>(stride));
  int64_t rows = 0;
  for (const auto& win : windows) rows += win.end - win.begin;
  std::fprintf(stderr, "orzo: %lld prompt tokens in %.2f s (%.1f tokens/s)\n", static_cast<long long>(rows), seconds,
               seconds > 0 ? static_cast<double>(rows) / seconds : 0.0);
  return 0;
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto flags = std::make_shared<PerplexityFlags>();
  auto* cmd = app.add_subcommand(
      "perplexity",
      "Perplexity of a text: exp of the mean negative log-probability of its tokens, each given the ones before it");
  cmd->footer(
      "Windowing (Hugging Face's sliding window): the text is scored in windows of at most --ctx tokens that start\n"
      "every --stride tokens; each window scores only the tokens no earlier window scored, given the tokens before\n"
      "them in the window (so never its own first token). --stride equal to --ctx (the default) gives disjoint\n"
      "windows, whose first tokens go unscored; a smaller stride gives every token but the text's first at least\n"
      "ctx - stride tokens of context, for ctx/stride times the compute. The windows run together through the\n"
      "batcher, as concurrent requests.");
  flags->engine.add_engine_to(*cmd);
  cmd->add_option("-f,--file", flags->file, "The text to score (UTF-8)")->required();
  cmd->add_option("--ctx", flags->ctx, "Tokens per window (default: the model's context length)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 24));
  cmd->add_option("--stride", flags->stride, "Tokens between window starts (default: the window)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_flag("--no-special", flags->no_special, "Do not add BOS or other special tokens to the text");
  cmd->callback([flags] {
    if (const int rc = run_perplexity(*flags); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace orzo::cli
