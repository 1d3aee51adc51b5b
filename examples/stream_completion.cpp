// A client actor that streams one completion to stdout.
//
//   stream_completion MODEL PROMPT [MAX_TOKENS]                   runs the model in this process
//   stream_completion MODEL PROMPT MAX_TOKENS HOST:PORT           uses a batcher published on another node
//
// Either way the text arrives the same way: the client actor receives TextChunks from its
// session, then one Completion. With a remote batcher only the tokenizer is loaded here, to
// tokenize the prompt and to detokenize in the session; the session registers with the
// remote batcher over the CAF middleman, and tokens come back as serialized messages.

#include "actors/engine.hpp"
#include "actors/system_config.hpp"
#include "text/tokenizer/tokenizer.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

namespace {

using namespace orzo;

// The application's own actor: prints the text to `out`, and on the Completion reports and
// exits. (It takes `out` rather than nothing also because CAF 0.17 dereferences a null
// pointer when it spawns a function actor without arguments.)
client_actor::behavior_type printer(client_actor::pointer self, std::FILE* out) {
  return {
      [out](TextChunk& chunk) {
        std::fwrite(chunk.text.data(), 1, chunk.text.size(), out);
        std::fflush(out);
      },
      [self](Completion& done) {
        std::fprintf(stderr, "\n[%s: %d prompt tokens, %d generated]\n", to_string(done.reason), done.usage.prompt_tokens,
                     done.usage.generated_tokens);
        if (done.reason == FinishReason::error) std::fprintf(stderr, "error: %s\n", done.message.c_str());
        self->quit();
      },
  };
}

int run(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL PROMPT [MAX_TOKENS [HOST:PORT]]\n", argv[0]);
    return 2;
  }
  caf::actor_system_config cfg;
  configure_actor_system(cfg);
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};

  std::unique_ptr<Engine> local;
  batcher_actor batcher;
  std::shared_ptr<const Tokenizer> tokenizer;
  if (argc > 4) {
    const std::string where = argv[4];
    const auto colon = where.rfind(':');
    if (colon == std::string::npos) throw std::invalid_argument("expected HOST:PORT, got " + where);
    auto remote = sys.middleman().remote_actor<batcher_actor>(where.substr(0, colon),
                                                              static_cast<uint16_t>(std::stoi(where.substr(colon + 1))));
    if (!remote) throw std::runtime_error("cannot reach the batcher at " + where + ": " + sys.render(remote.error()));
    batcher = *remote;
    tokenizer = std::make_shared<const Tokenizer>(Tokenizer::for_model(argv[1]));
  } else {
    EngineOptions options;
    options.model = argv[1];
    local = Engine::start(sys, options);
    batcher = local->batcher();
    tokenizer = local->tokenizer();
  }
  SessionRequest request;
  request.id = "example";
  request.prompt_ids = tokenizer->encode(argv[2]);
  request.sampling.temperature = 0;
  request.limits.max_tokens = argc > 3 ? std::atoi(argv[3]) : 64;
  auto client = sys.spawn(printer, stdout);
  spawn_session(sys, batcher, tokenizer, std::move(request), client);
  caf::scoped_actor self{sys};
  self->wait_for(client);
  if (local) local->shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stream_completion: %s\n", e.what());
    return 1;
  }
}
