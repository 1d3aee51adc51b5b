#pragma once
// `orzo worker`: serves one stage of a pipeline whose batcher runs in another process
// (`orzo serve --publish`, or any application that publishes its batcher). It connects
// through the CAF middleman, asks the batcher what KV pool and step size a stage must have,
// builds a CPU stage for its layers, joins, and serves until the batcher goes away (exit 1)
// or it is told to stop (SIGINT, SIGTERM: exit 0).
namespace CLI {
class App;
}

namespace orzo::cli {

void add_worker_command(CLI::App& app);

}  // namespace orzo::cli
