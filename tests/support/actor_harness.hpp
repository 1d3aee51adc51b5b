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
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace orzo::testing {

inline caf::actor_system_config& test_config(caf::actor_system_config& cfg) {
  configure_actor_system(cfg, 2);
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

class Collector {
 public:
  SessionCallbacks callbacks(const std::string& id) {
    SessionCallbacks cb;
    cb.on_text = [this, id](TextChunk& chunk) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& o = outcomes_[id];
      if (!o.completions.empty()) ++o.chunks_after_completion;
      if (!chunk.prompt_scores.empty() && !o.tokens.empty()) ++o.scores_after_tokens;
      o.prompt_scores.insert(o.prompt_scores.end(), chunk.prompt_scores.begin(), chunk.prompt_scores.end());
      o.tokens.insert(o.tokens.end(), chunk.tokens.begin(), chunk.tokens.end());
      o.top_logprobs.insert(o.top_logprobs.end(), chunk.top_logprobs.begin(), chunk.top_logprobs.end());
      o.text += chunk.text;
    };
    cb.on_done = [this, id](Completion& done) {
      std::lock_guard<std::mutex> lock(mutex_);
      outcomes_[id].completions.push_back(done);
      ++completed_;
      changed_.notify_all();
    };
    return cb;
  }

  // Waits until `n` completions have arrived in total.
  bool wait(size_t n, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return completed_ >= n; });
  }

  std::map<std::string, Outcome> outcomes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return outcomes_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Outcome> outcomes_;
  size_t completed_ = 0;
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
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
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
