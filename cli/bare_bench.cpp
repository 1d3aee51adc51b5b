#include "cli/bare_bench.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace orzo::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

CpuBackend::Options backend_options(const BenchOptions& o, int threads, int32_t blocks_per_seq) {
  CpuBackend::Options opt;
  opt.kv_blocks = blocks_per_seq * o.batch;
  opt.threads = threads;
  opt.max_rows = std::max(o.chunk, o.batch);
  opt.matmul = o.stage.matmul;
  opt.kv_dtype = o.stage.kv_cache_dtype;
  return opt;
}

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

// The KV blocks each sequence needs, once the shape is known to fit the model's context and
// this machine's memory.
int32_t blocks_per_sequence(const BenchOptions& o, const ModelConfig& cfg) {
  const int32_t bs = kDefaultBlockSize;
  const int64_t context = int64_t{o.prompt} + o.gen;
  if (context > cfg.max_position)
    throw std::invalid_argument("--prompt + --gen = " + std::to_string(context) + " exceeds the model's context of " +
                                std::to_string(cfg.max_position) + " tokens");
  const auto blocks_per_seq = static_cast<int32_t>((context + bs - 1) / bs);
  const double kv_bytes = static_cast<double>(blocks_per_seq) * o.batch * static_cast<double>(cfg.num_layers) *
                          static_cast<double>(KvCache::bytes_per_block_plane(bs, cfg.kv_dim(), o.stage.kv_cache_dtype));
  const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (kv_bytes > 0.8 * memory)
    throw std::invalid_argument("the KV cache for " + std::to_string(o.batch) + " x " + std::to_string(context) +
                                " tokens needs " + std::to_string(static_cast<int64_t>(kv_bytes / (1 << 20))) +
                                " MiB, more than this machine's memory allows");
  return blocks_per_seq;
}

}  // namespace

BareBench::BareBench(std::shared_ptr<const Model> model, const BenchOptions& o)
    : o_(o), vocab_(static_cast<int32_t>(model->config().vocab_size)),
      threads_(o.stage.threads > 0 ? o.stage.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      blocks_per_seq_(blocks_per_sequence(o, model->config())),
      backend_(std::move(model), backend_options(o, threads_, blocks_per_seq_)),
      tables_(static_cast<size_t>(o.batch)),
      prompt_tokens_(static_cast<size_t>(o.batch) * static_cast<size_t>(o.prompt)),
      next_(static_cast<size_t>(o.batch)),
      sampler_(greedy()) {
  for (int s = 0; s < o.batch; ++s)
    for (int32_t i = 0; i < blocks_per_seq_; ++i) tables_[static_cast<size_t>(s)].push_back(s * blocks_per_seq_ + i);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> any_token(0, vocab_ - 1);
  for (auto& t : prompt_tokens_) t = any_token(rng);
}

void BareBench::warm_up() {
  ForwardBatch warm;
  warm.block_tables = tables_;
  warm.add_chunk(0, prompt_tokens_.data(), 1, 0, true);
  backend_.forward(warm, hidden_, logits_);
}

double BareBench::prefill() {
  const auto t0 = Clock::now();
  int seq = 0, done = 0;
  while (seq < o_.batch) {
    ForwardBatch b;
    b.block_tables = tables_;
    std::vector<int> finishing;
    while (seq < o_.batch && b.rows() < o_.chunk) {
      const int take = std::min<int>(o_.prompt - done, o_.chunk - static_cast<int>(b.rows()));
      const bool last = done + take == o_.prompt;
      b.add_chunk(seq, prompt_tokens_.data() + static_cast<size_t>(seq) * static_cast<size_t>(o_.prompt) + done, take,
                  done, last);
      if (last) finishing.push_back(seq);
      done += take;
      if (last) ++seq, done = 0;
    }
    backend_.forward(b, hidden_, logits_);
    for (size_t i = 0; i < finishing.size(); ++i) next_[static_cast<size_t>(finishing[i])] = greedy_token(i);
  }
  return seconds_since(t0);
}

double BareBench::decode() {
  const auto t0 = Clock::now();
  for (int step = 0; step < o_.gen; ++step) {
    ForwardBatch b;
    b.block_tables = tables_;
    for (int s = 0; s < o_.batch; ++s) b.add_chunk(s, &next_[static_cast<size_t>(s)], 1, o_.prompt + step, true);
    backend_.forward(b, hidden_, logits_);
    for (int s = 0; s < o_.batch; ++s) next_[static_cast<size_t>(s)] = greedy_token(static_cast<size_t>(s));
  }
  return seconds_since(t0);
}

int32_t BareBench::greedy_token(size_t row) {
  return sampler_.sample(logits_.data() + row * static_cast<size_t>(vocab_), vocab_, nullptr, 0).token;
}

}  // namespace orzo::cli
