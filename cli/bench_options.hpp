#pragma once
// The knobs of `orzo bench`, shared by its bare forward-pass mode and its actor mode.

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
  bool async_scheduling = false;       // with --actors: BatcherOptions::async_scheduling
  int batch = 1;
  int prompt = 128;
  int gen = 32;
  int threads = 0;
  int chunk = 512;  // prefill tokens per forward call, like max_num_batched_tokens
  bool int8_activations = false;  // cpu::MatmulOptions (kernels/cpu/matmul.hpp)
  bool bf16_activations = StageOptions{}.bf16_activations;
  bool batch_invariant = false;
  bool int8_batches = StageOptions{}.int8_batches;
  DType kv_cache_dtype = StageOptions{}.kv_cache_dtype;
  std::string cpu_isa;            // --cpu-isa (cpu_kernels_flag.hpp)
  bool json = false;
  int rounds = 1;           // with --actors: the batch run this many times in one process, the median reported
  bool beside_bare = false;  // with --actors: each round also runs the bare forward pass, alternating
  int publish = 0;  // with --actors: publish the batcher on 127.0.0.1:publish and wait for remote stages to join
};

}  // namespace orzo::cli
