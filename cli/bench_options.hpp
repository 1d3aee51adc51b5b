#pragma once
// The knobs of `orzo bench`, shared by its bare forward-pass mode and its actor mode.

#include <optional>
#include <string>

#include "stages/stage_factory.hpp"

namespace orzo::cli {

struct BenchOptions {
  std::string model;
  std::string backend = "cpu";
  bool actors = false;
  std::string placement = "cpu";
  int ttft_probes = 0;
  std::string worker_thread = "auto";  // with --actors: own, shared or auto (see WorkerThread)
  bool async_scheduling = true;        // with --actors: BatcherOptions::async_scheduling
  bool prefix_caching = false;         // with --actors: keep full blocks in the prefix cache (no hits: random prompts)
  int batch = 1;
  int prompt = 128;
  int gen = 32;
  int chunk = 512;  // prefill tokens per forward call, like max_num_batched_tokens
  StageOptions stage;  // threads, arithmetic and KV cache dtype, as the engine's stages take them
  std::string cpu_isa;            // --cpu-isa (cpu_kernels_flag.hpp)
  bool json = false;
  int rounds = 1;           // with --actors: the batch run this many times in one process, the median reported
  bool beside_bare = false;  // with --actors: each round also runs the bare forward pass, alternating
  // With --actors: publish the batcher on 127.0.0.1:publish (0: a free port, printed) and wait for remote stages to join.
  std::optional<int> publish;
};

}  // namespace orzo::cli
