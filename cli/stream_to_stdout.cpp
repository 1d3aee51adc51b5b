#include "cli/stream_to_stdout.hpp"

#include <cstdio>
#include <future>
#include <utility>

namespace orzo::cli {

Completion stream_to_stdout(Engine& engine, SessionRequest request,
                            const std::function<void(const TextChunk&)>& on_chunk) {
  std::promise<Completion> done;
  SessionCallbacks callbacks;
  callbacks.on_text = [&](TextChunk& chunk) {
    if (on_chunk) on_chunk(chunk);
    std::fwrite(chunk.text.data(), 1, chunk.text.size(), stdout);
    std::fflush(stdout);
  };
  callbacks.on_done = [&](Completion& c) { done.set_value(c); };
  engine.generate(std::move(request), std::move(callbacks));
  Completion c = done.get_future().get();
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (c.reason == FinishReason::error)
    std::fprintf(stderr, "orzo: error: %s: %s\n", to_string(c.error), c.message.c_str());
  return c;
}

}  // namespace orzo::cli
