#pragma once
// Helpers for tests that run real actors: an actor system configured as orzo runs it, and a
// collector of what sessions deliver, which checks the delivery contract as it goes (chunks
// in order, then exactly one Completion, nothing after it).

#include "actors/session.hpp"
#include "actors/system_config.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace orzo::testing {

inline caf::actor_system_config& test_config(caf::actor_system_config& cfg) {
  configure_actor_system(cfg, ProcessThreads{2});
  return cfg;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<std::vector<TopLogprob>> top_logprobs;  // per token, when the request asked
  std::vector<PromptTokenScore> prompt_scores;        // when the request asked prompt_logprobs
  int scores_after_tokens = 0;                        // chunks breaking "every score before any token"
  std::string text;
  std::vector<Completion> completions;  // exactly one when the contract holds
  int chunks_after_completion = 0;
};

// The sanitizers run the kernels many times slower; a wait is a bound against a hang, not a
// measure of speed.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr int kSanitizerSlowdown = 10;
#else
inline constexpr int kSanitizerSlowdown = 1;
#endif

class Collector {
 public:
  SessionCallbacks callbacks(const std::string& id) {
    SessionCallbacks cb;
    // The callbacks share the state, not the collector: after a failed wait the test ends
    // and destroys its collector while sessions may still be delivering.
    cb.on_text = [state = state_, id](TextChunk& chunk) {
      std::lock_guard<std::mutex> lock(state->mutex);
      auto& o = state->outcomes[id];
      if (!o.completions.empty()) ++o.chunks_after_completion;
      if (!chunk.prompt_scores.empty() && !o.tokens.empty()) ++o.scores_after_tokens;
      o.prompt_scores.insert(o.prompt_scores.end(), chunk.prompt_scores.begin(), chunk.prompt_scores.end());
      o.tokens.insert(o.tokens.end(), chunk.tokens.begin(), chunk.tokens.end());
      o.top_logprobs.insert(o.top_logprobs.end(), chunk.top_logprobs.begin(), chunk.top_logprobs.end());
      o.text += chunk.text;
    };
    cb.on_done = [state = state_, id](Completion& done) {
      std::lock_guard<std::mutex> lock(state->mutex);
      state->outcomes[id].completions.push_back(done);
      ++state->completed;
      state->changed.notify_all();
    };
    return cb;
  }

  // Waits until `n` completions have arrived in total.
  bool wait(size_t n, std::chrono::seconds timeout = std::chrono::seconds(60 * kSanitizerSlowdown)) {
    std::unique_lock<std::mutex> lock(state_->mutex);
    return state_->changed.wait_for(lock, timeout, [&] { return state_->completed >= n; });
  }

  std::map<std::string, Outcome> outcomes() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->outcomes;
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    std::map<std::string, Outcome> outcomes;
    size_t completed = 0;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// A reply from the batcher, asked for synchronously (a default value if none comes).
template <class Reply, class Atom>
Reply ask(caf::actor_system& sys, const batcher_actor& batcher, Atom atom) {
  caf::scoped_actor self{sys};
  Reply out;
  self->request(batcher, std::chrono::seconds(10), atom).receive([&](Reply& r) { out = std::move(r); }, [&](caf::error&) {});
  return out;
}

// Polls `pred` until it holds or `timeout` passes.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(20 * kSanitizerSlowdown)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

inline BatcherStats stats_of(caf::actor_system& sys, const batcher_actor& batcher) {
  return ask<BatcherStats>(sys, batcher, stats_atom::value);
}

inline ModelHealth health_of(caf::actor_system& sys, const batcher_actor& batcher) {
  return ask<ModelHealth>(sys, batcher, health_atom::value);
}

}  // namespace orzo::testing
