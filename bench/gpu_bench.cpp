// The GPU forward pass against the H200's ceilings: single-stream decode, and prefill then
// decode of 64 and 256 concurrent sequences, straight on a CudaBackend (no actors), sampling on
// the device as the worker does. Each decode step is set against its roofline, measured in the
// same run: the bytes it must read (every weight once, the KV cache of every sequence) at the
// device-to-device copy bandwidth, or its FLOPs at the bf16 matrix rate, whichever binds.
//
//   gpu_bench -m MODEL [--batches 1,64,256] [--prompt 128] [--gen 128] [--logits-out FILE]
//
// --logits-out writes the f32 logits of the last position of a fixed prompt (ids 1..32), for
// bench/torch_reference.py to set against PyTorch's on the same weights.
#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/percentile.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/device.hpp"
#include "runtime/batch_sampler.hpp"
#include "runtime/cuda/cuda_backend.hpp"
#include "runtime/model.hpp"

namespace orzo {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kMatrixRate = 790e12;  // bf16 FLOP/s on random data, measured on these machines (KINDS.md)

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Bytes read plus bytes written per second by device-to-device copies of 1 GiB, best of 10.
double copy_bandwidth() {
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  cuda::check(cudaMalloc(&a, bytes), "bandwidth probe");
  cuda::check(cudaMalloc(&b, bytes), "bandwidth probe");
  cuda::check(cudaMemset(a, 1, bytes), "bandwidth probe");
  double best = 0;
  for (int i = 0; i < 10; ++i) {
    cuda::check(cudaDeviceSynchronize(), "bandwidth probe");
    const auto t0 = Clock::now();
    cuda::check(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice), "bandwidth probe");
    cuda::check(cudaDeviceSynchronize(), "bandwidth probe");
    best = std::max(best, 2.0 * static_cast<double>(bytes) / since(t0));
  }
  cudaFree(a);
  cudaFree(b);
  return best;
}

struct Run {
  int batch = 0;
  double prefill_s = 0, decode_s = 0;
  std::vector<double> ttft, itl;
  double roofline_step_s = 0;  // mean over the decode steps
};

class Bench {
 public:
  Bench(std::shared_ptr<const Model> model, int max_batch, int prompt, int gen, int chunk)
      : model_(std::move(model)), cfg_(model_->config()), prompt_(prompt), gen_(gen), chunk_(chunk) {
    cuda::CudaBackend::Options o;
    o.max_rows = std::max(chunk, max_batch);
    o.max_seqs = max_batch;
    o.max_model_len = prompt + gen + 1;
    backend_ = std::make_unique<cuda::CudaBackend>(model_, o);
    blocks_per_seq_ = (prompt + gen + 1 + kDefaultBlockSize - 1) / kDefaultBlockSize;
    backend_->allocate_kv(blocks_per_seq_ * max_batch + 1);
  }

  cuda::CudaBackend& backend() { return *backend_; }

  Run run(int batch, double bandwidth) {
    std::mt19937 rng(static_cast<uint32_t>(batch));
    std::uniform_int_distribution<int32_t> any(1, static_cast<int32_t>(cfg_.vocab_size) - 1);
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(batch));
    std::vector<std::vector<int32_t>> tables(static_cast<size_t>(batch));
    BatchSampler sampler;
    SamplingParams greedy;
    greedy.temperature = 0;
    std::vector<uint64_t> ids;
    for (int s = 0; s < batch; ++s) {
      auto& t = tokens[static_cast<size_t>(s)];
      for (int i = 0; i < prompt_; ++i) t.push_back(any(rng));
      for (int32_t b = 0; b < blocks_per_seq_; ++b) tables[static_cast<size_t>(s)].push_back(s * blocks_per_seq_ + b);
      sampler.start(static_cast<uint64_t>(s), greedy, t);
      ids.push_back(static_cast<uint64_t>(s));
    }
    std::vector<float> hidden;
    std::vector<DrawPlan> plans;
    std::vector<SampleResult> out;
    Run r;
    r.batch = batch;
    const auto t0 = Clock::now();
    // Prefill, sequence after sequence in chunks of at most chunk_ rows, as the scheduler packs it.
    int seq = 0, done = 0;
    while (seq < batch) {
      ForwardBatch b;
      std::vector<uint64_t> step_ids;
      std::vector<int> finishing;
      while (seq < batch && b.rows() < chunk_) {
        const int take = std::min<int>(prompt_ - done, chunk_ - static_cast<int>(b.rows()));
        const bool last = done + take == prompt_;
        const auto index = static_cast<int32_t>(b.block_tables.size());
        b.block_tables.push_back(tables[static_cast<size_t>(seq)]);
        step_ids.push_back(static_cast<uint64_t>(seq));
        b.add_chunk(index, tokens[static_cast<size_t>(seq)].data() + done, take, done, last);
        if (last) finishing.push_back(seq);
        done += take;
        if (last) ++seq, done = 0;
      }
      sampler.plan(b, step_ids, plans);
      backend_->forward_and_sample(b, hidden, plans, out);
      const double now = since(t0);
      for (size_t i = 0; i < finishing.size(); ++i) {
        tokens[static_cast<size_t>(finishing[i])].push_back(out[i].token);
        r.ttft.push_back(now);
      }
    }
    r.prefill_s = since(t0);
    // Decode: every sequence one token per step.
    double roofline = 0;
    const auto t1 = Clock::now();
    for (int step = 1; step < gen_; ++step) {
      ForwardBatch b;
      b.block_tables = tables;
      for (int s = 0; s < batch; ++s) {
        auto& t = tokens[static_cast<size_t>(s)];
        b.add_chunk(s, &t.back(), 1, static_cast<int32_t>(t.size()) - 1, true);
      }
      roofline += step_roofline(batch, prompt_ + step, bandwidth);
      const auto ts = Clock::now();
      sampler.plan(b, ids, plans);
      backend_->forward_and_sample(b, hidden, plans, out);
      r.itl.push_back(since(ts));
      for (int s = 0; s < batch; ++s) tokens[static_cast<size_t>(s)].push_back(out[static_cast<size_t>(s)].token);
    }
    r.decode_s = since(t1);
    r.roofline_step_s = gen_ > 1 ? roofline / (gen_ - 1) : 0;
    return r;
  }

  // A decode step of `batch` rows at context `context`: its bytes at the copy bandwidth, or its
  // FLOPs at the matrix rate, whichever takes longer.
  double step_roofline(int batch, int context, double bandwidth) const {
    const double half = 2;  // bytes per bf16 weight and KV element
    const double matrices = static_cast<double>(model_->layer_parameters()) + static_cast<double>(model_->lm_head().numel());
    const double kv = static_cast<double>(batch) * context * static_cast<double>(cfg_.num_layers * cfg_.kv_dim()) * 2;
    const double bytes = (matrices + kv) * half;
    const double flops = 2 * matrices * batch +
                         4.0 * batch * context * static_cast<double>(cfg_.num_layers * cfg_.q_dim());
    return std::max(bytes / bandwidth, flops / kMatrixRate);
  }

  void write_logits(const std::string& path) {
    std::vector<int32_t> prompt(32);
    for (int i = 0; i < 32; ++i) prompt[static_cast<size_t>(i)] = i + 1;
    ForwardBatch b;
    b.block_tables = {{0, 1}};
    b.add_chunk(0, prompt.data(), 32, 0, true);
    std::vector<float> hidden, logits;
    backend_->forward(b, hidden, logits);
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  }

 private:
  std::shared_ptr<const Model> model_;
  const ModelConfig& cfg_;
  int prompt_, gen_, chunk_;
  int32_t blocks_per_seq_ = 0;
  std::unique_ptr<cuda::CudaBackend> backend_;
};

int main_(int argc, char** argv) {
  CLI::App app{"orzo's GPU forward pass against the device's ceilings"};
  std::string model_path, logits_out;
  std::vector<int> batches = {1, 64, 256};
  int prompt = 128, gen = 128, chunk = 2048;
  app.add_option("-m,--model", model_path, "HF directory or .gguf")->required();
  app.add_option("--batches", batches, "Concurrent sequences, one run each")->delimiter(',');
  app.add_option("--prompt", prompt, "Prompt tokens per sequence")->check(CLI::Range(1, 1 << 16));
  app.add_option("--gen", gen, "Generated tokens per sequence")->check(CLI::Range(1, 1 << 16));
  app.add_option("--chunk", chunk, "Prefill rows per step")->check(CLI::Range(1, 1 << 16));
  app.add_option("--logits-out", logits_out, "Write the last logits of prompt ids 1..32 here");
  CLI11_PARSE(app, argc, argv);

  const auto props = cuda::device_properties(0);
  const double bandwidth = copy_bandwidth();
  const auto t_load = Clock::now();
  auto model = Model::load(model_path);
  Bench bench(model, *std::max_element(batches.begin(), batches.end()), prompt, gen, chunk);
  const double load_s = since(t_load);
  if (!logits_out.empty()) bench.write_logits(logits_out);

  nlohmann::json runs = nlohmann::json::array();
  for (int batch : batches) {
    bench.run(batch, bandwidth);  // warm-up: captures this batch's decode graphs
    const Run r = bench.run(batch, bandwidth);
    const double decode_tps = batch * (gen - 1) / r.decode_s;
    const double step = r.decode_s / (gen - 1);
    runs.push_back({{"batch", batch},
                    {"prefill_tps", batch * prompt / r.prefill_s},
                    {"decode_tps", decode_tps},
                    {"decode_tps_per_seq", decode_tps / batch},
                    {"step_ms", step * 1e3},
                    {"roofline_step_ms", r.roofline_step_s * 1e3},
                    {"of_roofline", r.roofline_step_s / step},
                    {"ttft_p50_ms", bench::percentile(r.ttft, 50) * 1e3},
                    {"ttft_p99_ms", bench::percentile(r.ttft, 99) * 1e3},
                    {"itl_p50_ms", bench::percentile(r.itl, 50) * 1e3},
                    {"itl_p99_ms", bench::percentile(r.itl, 99) * 1e3}});
    std::fprintf(stderr, "batch %3d: decode %9.1f tok/s (%.1f per sequence), step %.3f ms = %.0f%% of its roofline %.3f ms\n",
                 batch, decode_tps, decode_tps / batch, step * 1e3, 100 * r.roofline_step_s / step,
                 r.roofline_step_s * 1e3);
  }
  nlohmann::json j = {{"device", props.name},
                      {"copy_bandwidth_bytes_per_s", bandwidth},
                      {"matrix_rate_flops", kMatrixRate},
                      {"model", model_path},
                      {"storage", cuda::elem_name(bench.backend().storage())},
                      {"weight_bytes", bench.backend().weight_bytes()},
                      {"load_s", load_s},
                      {"decode_graphs", bench.backend().captured_graphs()},
                      {"prompt", prompt},
                      {"gen", gen},
                      {"runs", runs}};
  std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

}  // namespace
}  // namespace orzo

int main(int argc, char** argv) {
  try {
    return orzo::main_(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 1;
  }
}
