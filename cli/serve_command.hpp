#pragma once
// `orzo serve`: the OpenAI-compatible HTTP server (server/) over one model's actors. It
// listens before the model loads (so /health can say 503 meanwhile), optionally publishes
// the batcher on the CAF middleman for actor clients, and on SIGINT/SIGTERM stops
// accepting, lets requests in flight finish within a grace period, cancels the rest, and
// exits 0.
namespace CLI {
class App;
}

namespace orzo::cli {

void add_serve_command(CLI::App& app);

}  // namespace orzo::cli
