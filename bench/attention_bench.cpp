// Paged attention throughput in the two shapes a server sees: one long prefill chunk
// (causal, so half the score matrix) and a decode step of many sequences, one row each.
// Heads are those of the "small" model (16 query heads of 64 over 4 KV heads), for decode
// also 16 KV heads, where no query heads share their keys, and those of the two real models
// the tests and the README run: SmolLM2-135M (9 heads of 64 over 3 KV heads) and stories260K
// (8 heads of 8 over 4), whose narrow heads leave most of a vector empty. A decode step reads
// each layer's cache once, so the decode runs cycle through layers whose caches together
// overflow the last-level cache; a prefill reads the K/V it just wrote. Each shape runs on an
// f32 cache and on an f16 one ("/f16"), which halves the bytes read and widens each chunk; the
// long decode contexts also split across the threads ("/split"), as CPU stages run them.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_pool.hpp"
#include "kernels/cpu/attention.hpp"

namespace {

struct Heads {
  int64_t heads, kv_heads, dim;
};

// One thread per core unless ORZO_BENCH_THREADS says otherwise.
orzo::ThreadPool& pool() { return orzo::bench::bench_pool(0); }

struct Setup {
  orzo::KvCache cache;
  orzo::ForwardBatch batch;
  std::vector<float> q, out;
};

// `sequences` sequences of `context` positions each; the batch holds the last `rows` of each.
Setup make(Heads h, int64_t layers, int32_t sequences, int32_t context, int32_t rows, orzo::DType dtype) {
  const int32_t bs = orzo::kDefaultBlockSize, blocks_per_seq = (context + bs - 1) / bs;
  Setup s{orzo::KvCache(layers, sequences * blocks_per_seq, bs, h.kv_heads * h.dim, dtype), {}, {}, {}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<int32_t> ids(static_cast<size_t>(sequences * blocks_per_seq));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  const std::vector<int32_t> tokens(static_cast<size_t>(rows), 0);
  for (int32_t seq = 0; seq < sequences; ++seq) {
    const auto first = ids.begin() + seq * blocks_per_seq;
    s.batch.block_tables.emplace_back(first, first + blocks_per_seq);
    s.batch.add_chunk(seq, tokens.data(), rows, context - rows, true);
  }
  for (int64_t l = 0; l < layers; ++l)
    for (int32_t b = 0; b < s.cache.num_blocks(); ++b)
      for (int32_t slot = 0; slot < bs; ++slot) {
        std::vector<float> k(static_cast<size_t>(s.cache.kv_dim())), v(k.size());
        for (size_t i = 0; i < k.size(); ++i) {
          k[i] = uniform(rng);
          v[i] = uniform(rng);
        }
        orzo::cpu::store_kv(s.cache, l, b, slot, k.data(), v.data());
      }
  s.q.resize(static_cast<size_t>(s.batch.rows() * h.heads * h.dim));
  for (auto& x : s.q) x = uniform(rng);
  s.out.resize(s.q.size());
  return s;
}

void run(benchmark::State& state, Heads h, int64_t layers, int32_t sequences, int32_t context, int32_t rows,
         orzo::DType dtype, bool split) {
  Setup s = make(h, layers, sequences, context, rows, dtype);
  const orzo::cpu::AttentionShape shape{h.heads, h.kv_heads, h.dim, std::nullopt};
  int64_t layer = 0;
  for (auto _ : state) {
    orzo::cpu::paged_attention(s.q.data(), s.batch, s.cache, orzo::cpu::KvPlace{layer, 0}, shape, s.out.data(), pool(), split);
    layer = (layer + 1) % layers;
    benchmark::ClobberMemory();
  }
  // Scores and the weighted sum of values, over the positions each row sees.
  double visible = 0;
  for (int32_t p : s.batch.positions) visible += p + 1;
  state.counters["FLOPS"] = benchmark::Counter(4.0 * visible * static_cast<double>(h.heads * h.dim),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(s.batch.rows()),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// Registers the shape twice: on an f32 cache, and on an f16 one; with `split`, twice more with
// long decode contexts split across the threads ("/split", what CPU stages do unless batch-invariant).
void add(const std::string& name, Heads h, int64_t layers, int32_t sequences, int32_t context, int32_t rows,
         benchmark::TimeUnit unit, bool split = false) {
  for (bool split_contexts : {false, true}) {
    if (split_contexts && !split) continue;
    for (orzo::DType dtype : {orzo::DType::F32, orzo::DType::F16})
      benchmark::RegisterBenchmark(
          (name + (dtype == orzo::DType::F16 ? "/f16" : "") + (split_contexts ? "/split" : "")).c_str(),
          [=](benchmark::State& st) { run(st, h, layers, sequences, context, rows, dtype, split_contexts); })
          ->Unit(unit)
          ->UseRealTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  add("attention/prefill/rows512", {16, 4, 64}, 1, 1, 512, 512, benchmark::kMillisecond);
  for (int64_t kv_heads : {4, 16})
    add("attention/decode/seqs32/ctx512/kv_heads" + std::to_string(kv_heads), {16, kv_heads, 64}, 8, 32, 512, 1,
        benchmark::kMicrosecond);
  add("attention/decode/seqs64/ctx512/smollm2", {9, 3, 64}, 8, 64, 512, 1, benchmark::kMicrosecond);
  // Long contexts: each step reads 48 MiB of f32 keys and values a layer, far past any cache.
  add("attention/decode/seqs8/ctx8192/smollm2", {9, 3, 64}, 4, 8, 8192, 1, benchmark::kMicrosecond, true);
  // One long sequence: one tile a KV head, three for SmolLM2, whatever the threads.
  // One sequence at short contexts: its three tiles split only to even out the threads.
  add("attention/decode/seqs1/ctx256/smollm2", {9, 3, 64}, 8, 1, 256, 1, benchmark::kMicrosecond, true);
  add("attention/decode/seqs1/ctx640/smollm2", {9, 3, 64}, 8, 1, 640, 1, benchmark::kMicrosecond, true);
  add("attention/decode/seqs1/ctx16384/smollm2", {9, 3, 64}, 8, 1, 16384, 1, benchmark::kMicrosecond, true);
  add("attention/decode/seqs64/ctx160/stories260K", {8, 4, 8}, 5, 64, 160, 1, benchmark::kMicrosecond);
  add("attention/prefill/rows512/stories260K", {8, 4, 8}, 1, 1, 512, 512, benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
