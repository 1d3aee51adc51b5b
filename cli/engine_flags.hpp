#pragma once
// The flags every model-running subcommand shares (model, placement, threads, batching,
// sampling), and turning them into an EngineOptions and a SessionRequest.

#include "actors/engine.hpp"
#include "actors/system_config.hpp"

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace orzo::cli {

// The built-in stories260K's path, for a command given no -m; throws where it is missing.
std::string default_model();

struct EngineFlags {
  std::string model;  // empty: the built-in default model
  EngineOptions engine;
  int max_tokens = 256;
  float temperature = 0.8f;  // llama.cpp's defaults
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int64_t seed = -1;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  std::string worker_thread = "auto";
  bool enforce_eager = false;
  std::string cpu_isa;  // --cpu-isa

  void add_to(CLI::App& cmd);          // both of the below
  void add_engine_to(CLI::App& cmd);   // model, placement, threads, batching, KV cache
  void add_sampling_to(CLI::App& cmd);  // one request's sampling and limits
  // Fills engine.model, saying on stderr which model it is when it is the default one, and
  // selects the CPU kernels (cpu_kernels_flag.hpp).
  EngineOptions engine_options();
  // `started`: the engine started from engine_options(), whose model may stop on more than its EOS.
  SessionRequest session_request(std::string id, const Engine& started) const;
  // The threads to configure the actor system for: -t for each CPU stage of the placement.
  ProcessThreads process_threads() const;
  // After engine_options(): the CPU and its kernels' ISA level, for the log.
  const std::string& cpu_kernels() const { return cpu_kernels_; }

 private:
  bool runs_default_model_ = false;
  std::string cpu_kernels_;
};

// "own", "shared" or "auto", as --worker-thread takes them.
WorkerThread parse_worker_thread(const std::string& name);

// "KV cache: 1024.0 MiB in 10922 blocks of 16 tokens, ...; 4.9 sequences of 32768 tokens at
// once": what the pool holds, as vLLM states it at start.
std::string kv_pool_text(const KvPool& pool);

}  // namespace orzo::cli
