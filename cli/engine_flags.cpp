#include "cli/engine_flags.hpp"

#include "cli/cpu_kernels_flag.hpp"
#include "runtime/model.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <unistd.h>

namespace orzo::cli {

// An installed orzo takes the copy installed beside it (share/orzo), so that it does not depend
// on the source tree it was built from; a build's orzo takes the one in that source tree.
std::string default_model() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path().parent_path() / "share" / "orzo" / "stories260K" / "stories260K.gguf";
    if (std::filesystem::exists(installed)) return installed.string();
  }
  if (std::filesystem::exists(ORZO_DEFAULT_MODEL)) return ORZO_DEFAULT_MODEL;
  throw std::runtime_error("no model given (-m) and the default model was not found at " +
                           std::string(ORZO_DEFAULT_MODEL));
}

void EngineFlags::add_to(CLI::App& cmd) {
  add_engine_to(cmd);
  add_sampling_to(cmd);
}

void EngineFlags::add_engine_to(CLI::App& cmd) {
  cmd.add_option("-m,--model", model, "HF model directory or .gguf file (default: the built-in stories260K, a tiny Llama that writes children's stories)");
  cmd.add_option("--quantize", engine.quantize,
                 "Re-encode the weights while loading, as `orzo quantize` TYPE does (q8_0, q4_k, Q4_K_M, ...)");
  cmd.add_option("--placement", engine.placement,
                 "Workers and their layers, e.g. cpu:0-2,cpu:2-5 or cpu*2; whole-model replicas separated by ';'")
      ->capture_default_str();
  cmd.add_option("--replicas", engine.replicas,
                 "Data-parallel copies of the placement behind the one batcher, each with its own KV cache (CUDA "
                 "stages move to the next GPUs; remote ones wait for their own workers)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd.add_option("-t,--threads", engine.backend.threads, "CPU threads per worker (0: one per core)")->check(CLI::Range(0, 1024));
  add_matmul_flags(cmd, engine.backend.matmul);
  add_cpu_isa_flag(cmd, cpu_isa);
  cmd.add_option("--max-num-seqs", engine.scheduler.max_num_seqs, "Sequences per step at most")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd.add_option("--max-num-batched-tokens", engine.scheduler.max_num_batched_tokens, "Tokens per step at most")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd.add_flag("--async-scheduling,!--no-async-scheduling", engine.async_scheduling,
               "Plan each step while the one before it computes, so sampling, delivery and planning overlap the "
               "forward pass (the default, as in vLLM; pipelines of one stage, others step one at a time); "
               "--no-async-scheduling steps one at a time");
  cmd.add_option("--worker-thread", worker_thread,
                 "own: every worker on a thread of its own; shared: on the actor scheduler's threads; "
                 "auto: shared from 3 scheduler threads up")
      ->check(CLI::IsMember({"auto", "own", "shared"}))
      ->capture_default_str();
  cmd.add_option("--kv-blocks", engine.kv_blocks, "KV cache blocks (0: automatic)")->check(CLI::Range(0, 1 << 24));
  cmd.add_option("--kv-cache-memory", engine.backend.kv_budget_bytes,
                 "CPU: memory for the KV cache of each replica, as bytes or with a unit (8GiB, 512MB; default 1GiB): "
                 "the pool holds --max-num-seqs full contexts where this affords them, and fewer where not")
      ->transform(CLI::AsSizeValue(true))
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 50))
      ->excludes("--kv-blocks");
  add_kv_cache_dtype_flag(cmd, engine.backend.kv_cache_dtype);
  cmd.add_flag("!--no-hybrid-kv", engine.hybrid_kv,
               "Keep every layer's KV for every position, in one block table; by default sliding-window layers "
               "(Gemma 2/3) keep only their window where the context outgrows it");
  cmd.add_option("--max-model-len", engine.max_model_len, "Context length (0: the model's)")->check(CLI::Range(0, 1 << 24));
  cmd.add_option("--gpu-memory-utilization", engine.backend.gpu_memory_utilization,
                 "Share of each GPU's memory a CUDA stage may fill, KV cache included")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  cmd.add_flag("--enforce-eager", enforce_eager, "Run every step of CUDA stages eagerly, without CUDA graphs");
}

void EngineFlags::add_sampling_to(CLI::App& cmd) {
  cmd.add_option("-n,--max-tokens", max_tokens, "Tokens to generate at most")->check(CLI::Range(1, 1 << 24))->capture_default_str();
  cmd.add_option("--temperature", temperature, "0 for greedy")->check(CLI::Range(0.0, 100.0))->capture_default_str();
  cmd.add_option("--top-k", top_k, "0: off")->check(CLI::Range(0, 1 << 24))->capture_default_str();
  cmd.add_option("--top-p", top_p, "1: off")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd.add_option("--min-p", min_p, "0: off")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd.add_option("--repeat-penalty", repeat_penalty, "1: off")->check(CLI::Range(0.0, 100.0))->capture_default_str();
  cmd.add_option("--seed", seed, "Sampling seed (-1: random)");
  cmd.add_option("--stop", stop, "Stop string (repeatable)");
  cmd.add_flag("--ignore-eos", ignore_eos, "Keep generating past end-of-sequence tokens");
}

ProcessThreads EngineFlags::process_threads() const {
  return engine_threads(engine.placement, engine.replicas, engine.backend.threads);
}

WorkerThread parse_worker_thread(const std::string& name) {
  if (name == "own") return WorkerThread::own;
  if (name == "shared") return WorkerThread::scheduler;
  return WorkerThread::automatic;
}

EngineOptions EngineFlags::engine_options() {
  EngineOptions o = engine;
  o.worker_thread = parse_worker_thread(worker_thread);
  o.backend.cuda_graphs = !enforce_eager;
  cpu_kernels_ = select_cpu_kernels(cpu_isa);  // first: it picks the level the next line describes
  cpu_kernels_ += "; " + quantized_arithmetic(o.backend.matmul);
  runs_default_model_ = model.empty();
  if (runs_default_model_) {
    o.model = default_model();
    std::fprintf(stderr,
                 "orzo: no -m given: running the built-in default model, stories260K (a 260K-parameter Llama "
                 "trained on TinyStories, which writes children's stories: %s)\n",
                 o.model.c_str());
  } else {
    o.model = model;
  }
  return o;
}

SessionRequest EngineFlags::session_request(std::string id, const Engine& started) const {
  SessionRequest r;
  r.id = std::move(id);
  r.sampling.temperature = temperature;
  r.sampling.top_k = top_k;
  r.sampling.top_p = top_p;
  r.sampling.min_p = min_p;
  r.sampling.repetition_penalty = repeat_penalty;
  if (seed >= 0) r.sampling.seed = static_cast<uint64_t>(seed);
  r.limits.max_tokens = max_tokens;
  r.limits.ignore_eos = ignore_eos;
  // stories260K was trained to end a story with BOS, never with its EOS (llama2.c stops at
  // BOS): without this the default model runs on into the next story until --max-tokens.
  if (runs_default_model_ && !ignore_eos)
    if (const auto bos = started.model()->config().bos_token_id) r.limits.stop_token_ids.push_back(*bos);
  r.stop = stop;
  return r;
}

std::string kv_pool_text(const KvPool& pool) {
  char text[256];
  const std::string layout = pool.windows.size() > 1
                                 ? ", sliding layers apart (" + std::to_string(pool.windows.size()) + " tables a sequence)"
                                 : "";
  std::string elements;
  for (DType t : pool.dtypes) elements += (elements.empty() ? " of " : "/") + dtype_lower_name(t);
  std::snprintf(text, sizeof text, "KV cache: %.1f MiB%s in %d blocks of %d tokens%s; %.1f sequences of %d tokens at once",
                static_cast<double>(pool.bytes) / (1 << 20), elements.c_str(), pool.blocks, pool.block_size, layout.c_str(),
                pool.full_contexts(), pool.max_model_len);
  return text;
}

}  // namespace orzo::cli
