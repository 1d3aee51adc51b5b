#include "cli/bench_command.hpp"
#include "cli/engine_flags.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/actor_bench.hpp"
#include "cli/bare_bench.hpp"
#include "cli/bench_options.hpp"
#include "cli/cpu_kernels_flag.hpp"
#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_blas.hpp"
#include "kernels/cpu/matmul_q8.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/model.hpp"

namespace orzo::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The decode roofline's bandwidth, measured on the bytes decode actually reads: this
// model's mapped matrices, summed by the same number of threads (best of 3 passes). On a
// VM, the speed of memory depends on which pages hold the data, so a separate buffer is
// only a rough stand-in.
double weight_read_bandwidth(const Model& model, int threads) {
  std::vector<const TensorView*> matrices = model.layer_matrices();
  matrices.push_back(&model.lm_head());
  ThreadPool pool(threads);
  std::vector<uint64_t> sink(static_cast<size_t>(pool.size()));
  double best = 0, bytes = 0;
  for (const auto* t : matrices) bytes += static_cast<double>(t->nbytes);
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = Clock::now();
    for (const auto* t : matrices) {
      const auto* words = static_cast<const uint64_t*>(t->data);
      const auto n = static_cast<int64_t>(t->nbytes / sizeof(uint64_t));
      pool.parallel_for(
          n,
          [&](int64_t begin, int64_t end, int thread) {
            constexpr int64_t kLanes = 16;
            uint64_t acc[kLanes] = {};
            int64_t i = begin;
            for (; i + kLanes <= end; i += kLanes)
              for (int64_t j = 0; j < kLanes; ++j) acc[j] += words[i + j];
            for (; i < end; ++i) acc[0] += words[i];
            for (auto a : acc) sink[static_cast<size_t>(thread)] += a;
          },
          1 << 12);
    }
    best = std::max(best, bytes / seconds_since(t0));
  }
  volatile uint64_t keep = sink[0];
  static_cast<void>(keep);
  return best;
}

// What a MoE model's decode steps did with its experts: distinct experts run per layer and
// step, and rows each served per read of its weights.
struct DecodeExperts {
  double run_per_layer_step = 0, rows_per_expert = 0;
};

void report_bench(const BenchOptions& o, const Model& model, int threads, double prefill_s, double decode_s,
                  const std::optional<DecodeExperts>& experts) {
  const ModelConfig& cfg = model.config();
  const double prefill_tps = o.batch * o.prompt / prefill_s;
  const double weight_bw = o.json ? weight_read_bandwidth(model, threads) : 0.0;
  const double decode_tps = o.gen > 0 ? o.batch * o.gen / decode_s : 0.0;
  const double per_seq = o.gen > 0 ? o.gen / decode_s : 0.0;
  const cpu::MatmulOptions& m = o.stage.matmul;
  if (o.json) {
    const int64_t one_digit_from = cpu::one_digit_from_rows(m);
    const int64_t tiles_from = cpu::tiles_from_rows(m, DType::Q4_K);
    nlohmann::json j = {{"model", o.model},           {"batch", o.batch},          {"prompt", o.prompt},
                        {"gen", o.gen},               {"threads", threads},        {"prefill_tps", prefill_tps},
                        {"decode_tps", decode_tps},   {"decode_tps_per_seq", per_seq},
                        {"weight_bytes_per_token", model.weight_bytes_per_token()},
                        {"layer_parameters", model.layer_parameters()},
                        {"lm_head_parameters", model.lm_head().numel()},
                        {"kv_bytes_per_token_per_position",
                         cfg.num_layers * cfg.kv_dim() * 2 * static_cast<int64_t>(dtype_block_bytes(o.stage.kv_cache_dtype))},
                        {"kv_cache_dtype", dtype_name(o.stage.kv_cache_dtype)},
                        {"weight_read_bytes_per_s", weight_bw},
                        // What each kind of weight's products round the activations to (kernels/cpu/matmul.hpp).
                        {"bf16_weight_activations", m.bf16_activations && cpu::kernels().matmul_bf16 ? "bf16" : "f32"},
                        {"block_type_activations", m.int8_activations     ? "int8"
                                                   : cpu::has_matmul_q16() ? "int8x2"
                                                                           : "f32"},
                        // From how many rows block types take one int8 digit (1: every row).
                        {"one_digit_from_rows", one_digit_from > 0 ? nlohmann::json(one_digit_from) : nlohmann::json()},
                        // From how many rows products take AMX tiles: BF16 weights, and F16 and block types.
                        {"tiles_from_rows", tiles_from > 0
                                                ? nlohmann::json{{"bf16", cpu::tiles_from_rows(m, DType::BF16)},
                                                                 {"decoded", tiles_from}}
                                                : nlohmann::json()},
                        {"batch_invariant", m.batch_invariant},
                        {"cpu", cpu::cpu_model_name()},
                        {"cpu_isa", cpu::isa_name(cpu::kernels().isa)},
                        {"blas_core", cpu::blas_core().name}};
    if (experts)
      j["decode_experts"] = {{"run_per_layer_step", experts->run_per_layer_step},
                             {"rows_per_expert_read", experts->rows_per_expert}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("model %s  batch %d  prompt %d  gen %d  threads %d\n", o.model.c_str(), o.batch, o.prompt, o.gen, threads);
    std::printf("CPU %s, kernels %s, OpenBLAS %s\n", cpu::cpu_model_name().c_str(), cpu::isa_name(cpu::kernels().isa),
                cpu::blas_core().name.c_str());
    std::printf("%s\n", quantized_arithmetic(m).c_str());
    std::printf("prefill: %8.1f tokens/s (%.3f s)\n", prefill_tps, prefill_s);
    std::printf("decode:  %8.1f tokens/s aggregate, %.1f tokens/s per sequence (%.3f s)\n", decode_tps, per_seq, decode_s);
    if (experts)
      std::printf("experts: %.1f of %lld run per layer and decode step, each read for %.2f rows\n",
                  experts->run_per_layer_step, static_cast<long long>(cfg.num_experts), experts->rows_per_expert);
  }
}

void run_bench(const BenchOptions& o) {
  auto model = Model::load(o.model);
  BareBench bench(model, o);
  bench.warm_up();
  const double prefill_s = bench.prefill();
  const CpuBackend::ExpertUse before = bench.expert_use();
  const double decode_s = bench.decode();
  const CpuBackend::ExpertUse& after = bench.expert_use();
  std::optional<DecodeExperts> experts;
  if (after.routings > before.routings) {
    const auto routings = static_cast<double>(after.routings - before.routings);
    const auto run = static_cast<double>(after.experts_run - before.experts_run);
    experts = DecodeExperts{run / routings, static_cast<double>(after.choices - before.choices) / run};
  }
  report_bench(o, *model, bench.threads(), prefill_s, decode_s, experts);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Offline throughput: B sequences of P prompt tokens, then G decode steps");
  cmd->add_option("-m,--model", o->model,
                  "HF model directory or .gguf file (default: the built-in stories260K; not with --backend null)");
  cmd->add_option("--backend", o->backend, "cpu, or null: no math, to measure the runtime alone (implies --actors)")
      ->check(CLI::IsMember({"cpu", "null"}))
      ->capture_default_str();
  cmd->add_flag("--actors", o->actors, "Run the sequences as sessions through the batcher and workers");
  cmd->add_option("--placement", o->placement, "Workers and their layers, with --actors")->capture_default_str();
  cmd->add_option("--worker-thread", o->worker_thread, "With --actors: own, shared or auto, as for generate")
      ->check(CLI::IsMember({"auto", "own", "shared"}))
      ->capture_default_str();
  cmd->add_flag("--async-scheduling,!--no-async-scheduling", o->async_scheduling,
               "With --actors: plan each step while the one before it computes (the default; one-stage pipelines), or "
               "step one at a time");
  cmd->add_flag("--prefix-caching", o->prefix_caching,
               "With --actors: keep finished blocks in the prefix cache, so that once the pool is full every new block "
               "is an eviction (random prompts never hit it)");
  cmd->add_option("--ttft-probes", o->ttft_probes,
                  "With --actors: new requests sent one by one while the batch decodes, for TTFT percentiles")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--rounds", o->rounds, "With --actors: run the batch this many times in one process; report the median")
      ->check(CLI::Range(1, 10000));
  cmd->add_flag("--beside-bare", o->beside_bare,
                "With --actors: before each round run the same job on the bare forward pass, and report actors / bare");
  cmd->add_option("--batch", o->batch, "Number of sequences")->check(CLI::Range(1, 4096));
  cmd->add_option("--prompt", o->prompt, "Prompt tokens per sequence")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--gen", o->gen, "Decode steps")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-t,--threads", o->stage.threads, "Compute threads (default: one per core)")->check(CLI::Range(0, 1024));
  cmd->add_option("--chunk", o->chunk, "Prefill tokens per forward call")->check(CLI::Range(1, 1 << 16));
  cmd->add_flag("--json", o->json, "Print one JSON object");
  add_matmul_flags(*cmd, o->stage.matmul);
  add_kv_cache_dtype_flag(*cmd, o->stage.kv_cache_dtype);
  cmd->add_option("--publish", o->publish,
                  "With --actors: publish the batcher on 127.0.0.1:PORT (0: a free port, printed) and wait until "
                  "`orzo worker`s serve the placement's remote stages")
      ->check(CLI::Range(0, 65535));
  add_cpu_isa_flag(*cmd, o->cpu_isa);
  cmd->callback([o] {
    select_cpu_kernels(o->cpu_isa);
    if (o->backend != "null" && o->model.empty()) o->model = default_model();
    if (o->backend == "null" || o->actors) return run_actor_bench(*o);
    if (o->rounds > 1 || o->beside_bare || o->prefix_caching)
      throw std::invalid_argument("bench: --rounds, --beside-bare and --prefix-caching need --actors");
    run_bench(*o);
  });
}

}  // namespace orzo::cli
