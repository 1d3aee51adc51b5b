// One client actor driving N concurrent sessions on one model, reporting throughput.
//
//   concurrent_sessions MODEL [SESSIONS [MAX_TOKENS]]
//
// A single actor can be the client of many sessions: every chunk and completion names its
// request, and messages from one session arrive in order.

#include "actors/engine.hpp"
#include "actors/system_config.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

using namespace orzo;

struct Counts {
  int64_t tokens = 0;
  int completed = 0;
  int failed = 0;
};

client_actor::behavior_type counter(client_actor::stateful_pointer<Counts> self, int sessions) {
  return {
      [self](TextChunk& chunk) { self->state.tokens += static_cast<int64_t>(chunk.tokens.size()); },
      [self, sessions](Completion& done) {
        if (done.reason == FinishReason::error) {
          ++self->state.failed;
          std::fprintf(stderr, "%s failed: %s\n", done.request_id.c_str(), done.message.c_str());
        }
        if (++self->state.completed == sessions) {
          std::printf("%d sessions, %lld tokens, %d failed\n", sessions, static_cast<long long>(self->state.tokens),
                      self->state.failed);
          self->quit();
        }
      },
  };
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [SESSIONS [MAX_TOKENS]]\n", argv[0]);
    return 2;
  }
  const int sessions = argc > 2 ? std::atoi(argv[2]) : 16;
  const int max_tokens = argc > 3 ? std::atoi(argv[3]) : 64;
  try {
    caf::actor_system_config cfg;
    configure_actor_system(cfg);
    caf::actor_system sys{cfg};
    EngineOptions options;
    options.model = argv[1];
    auto engine = Engine::start(sys, options);
    auto client = sys.spawn(counter, sessions);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < sessions; ++i) {
      SessionRequest r;
      r.id = "session-" + std::to_string(i);
      r.prompt_ids = engine->tokenize("Once upon a time, in a town called " + std::to_string(i) + ",");
      r.sampling.temperature = 0.8f;
      r.sampling.seed = static_cast<uint64_t>(i);
      r.limits.max_tokens = max_tokens;
      engine->generate(std::move(r), client);
    }
    caf::scoped_actor self{sys};
    self->wait_for(client);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%.2f s, %.1f completions/s\n", s, sessions / s);
    engine->shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "concurrent_sessions: %s\n", e.what());
    return 1;
  }
  return 0;
}
