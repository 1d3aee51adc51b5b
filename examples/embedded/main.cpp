// An application that embeds orzo: it owns the actor system, loads a model into it with
// Engine::start, and has a completion streamed into an actor of its own, which collects the
// text after the prompt and, at the end, prints both with the reason the completion ended.
//
//   orzo-embedded MODEL PROMPT MAX_TOKENS
//
// Built against an installed orzo (see README.md); exits 0 unless the completion failed.

#include "actors/engine.hpp"
#include "actors/system_config.hpp"

#include <caf/all.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace {

// The prompt, then the text streamed in after it so far.
struct Transcript {
  std::string text;
  int chunks = 0;
};

// The application's actor. orzo only needs it to speak client_actor: TextChunks in order,
// then one Completion. It quits with an error when the completion failed, so that whoever
// monitors it learns the outcome from its exit reason.
orzo::client_actor::behavior_type collector(orzo::client_actor::stateful_pointer<Transcript> self,
                                            std::string prompt) {
  self->state.text = std::move(prompt);
  return {
      [self](orzo::TextChunk& chunk) {
        self->state.text += chunk.text;
        ++self->state.chunks;
      },
      [self](orzo::Completion& done) {
        std::printf("%s\n[finish: %s; %d tokens in %d chunks]\n", self->state.text.c_str(), to_string(done.reason),
                    done.usage.generated_tokens, self->state.chunks);
        if (done.reason == orzo::FinishReason::error) {
          self->quit(caf::make_error(caf::sec::runtime_error, std::string(to_string(done.error)) + ": " + done.message));
          return;
        }
        self->quit();
      },
  };
}

int parse_max_tokens(const char* arg) {
  char* end = nullptr;
  const long n = std::strtol(arg, &end, 10);
  if (end == arg || *end != '\0' || n < 1 || n > std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument("MAX_TOKENS must be a positive integer, got '" + std::string(arg) + "'");
  }
  return static_cast<int>(n);
}

int run(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL PROMPT MAX_TOKENS\n", argv[0]);
    return 2;
  }
  const int max_tokens = parse_max_tokens(argv[3]);

  // The application's own system: orzo's settings (its message types registered, the
  // scheduler sized to the machine) go in next to whatever else the application configures.
  caf::actor_system_config cfg;
  orzo::configure_actor_system(cfg);
  caf::actor_system sys{cfg};

  orzo::EngineOptions options;
  options.model = argv[1];
  const std::unique_ptr<orzo::Engine> engine = orzo::Engine::start(sys, options);

  orzo::SessionRequest request;
  request.id = "embedded";
  request.prompt_ids = engine->tokenize(argv[2]);  // sessions take ids; the engine has the tokenizer
  request.sampling.temperature = 0;                // greedy: the same text on every run
  request.limits.max_tokens = max_tokens;

  auto client = sys.spawn(collector, std::string(argv[2]));
  caf::scoped_actor self{sys};
  self->monitor(client);
  engine->generate(std::move(request), client);

  caf::error outcome;
  self->receive([&](caf::down_msg& down) { outcome = std::move(down.reason); });
  engine->shutdown();
  if (outcome != caf::exit_reason::normal) {
    std::fprintf(stderr, "orzo-embedded: %s\n", sys.render(outcome).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // orzo::LoadError, std::invalid_argument
    std::fprintf(stderr, "orzo-embedded: %s\n", e.what());
    return 1;
  }
}
