// Per-token cost of turning sampled ids into streamed text: Detokenizer::push, then
// StopMatcher::push with four stop strings, alone and chained, and one-shot decode.
// The vocabulary is shaped like a 32k BPE one: the 256 byte-fallback bytes, then printable
// ASCII pieces of 1-8 bytes (40% with a leading space), whole multi-byte characters and
// halves of them. The stream mixes random pieces with characters spelled byte by byte.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "text/decode_table.hpp"
#include "text/detokenizer.hpp"
#include "text/stop_matcher.hpp"

namespace {

constexpr size_t kVocab = 32000, kStream = 4096;

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  }
  s += static_cast<char>(0x80 | (cp & 0x3F));
  return s;
}

struct Workload {
  orzo::DecodeTable table;
  std::vector<int32_t> ids;
  std::vector<std::string> deltas;  // what the detokenizer makes of `ids`
};

Workload make_workload() {
  Workload w;
  std::mt19937 rng(1);
  auto pick = [&](uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng); };
  auto character = [&] { return utf8(pick(3) ? 0xE0 + pick(0x100) : 0x4E00 + pick(0x5000)); };
  for (int b = 0; b < 256; ++b) w.table.bytes.emplace_back(1, static_cast<char>(b));
  while (w.table.bytes.size() < kVocab) {
    std::string piece;
    const uint32_t kind = pick(100);
    if (kind < 93) {
      if (kind < 40) piece += ' ';
      for (uint32_t n = 1 + pick(8); n > 0; --n) piece += static_cast<char>('!' + pick(94));
    } else if (kind < 98) {
      piece = character();
    } else {
      const std::string c = character();
      piece = pick(2) ? c.substr(0, 1) : c.substr(1);
    }
    w.table.bytes.push_back(piece);
  }
  w.table.special.assign(kVocab, 0);
  w.table.special[256] = 1;
  w.table.strip_leading_space = true;
  while (w.ids.size() < kStream) {
    if (pick(20)) {
      w.ids.push_back(static_cast<int32_t>(256 + pick(kVocab - 256)));
    } else {
      for (const char c : character()) w.ids.push_back(static_cast<uint8_t>(c));
    }
  }
  orzo::Detokenizer d(w.table);
  for (const int32_t id : w.ids) w.deltas.emplace_back(d.push(id));
  return w;
}

const Workload& workload() {
  static const Workload w = make_workload();
  return w;
}

const std::vector<std::string> kStops = {"\n\nUser:", "</s>", "###", "<|im_end|>"};

void BM_DetokenizerPush(benchmark::State& state) {
  const Workload& w = workload();
  for (auto _ : state) {
    orzo::Detokenizer d(w.table);
    for (const int32_t id : w.ids) benchmark::DoNotOptimize(d.push(id).data());
    benchmark::DoNotOptimize(d.finish().data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * w.ids.size()));
}
BENCHMARK(BM_DetokenizerPush);

// A stop string may occur in the random text; the matcher is then replaced, as a new
// request would bring its own.
void BM_StopMatcherPush(benchmark::State& state) {
  const Workload& w = workload();
  for (auto _ : state) {
    orzo::StopMatcher m(kStops);
    for (const auto& delta : w.deltas) {
      const orzo::StopMatcher::Result r = m.push(delta);
      benchmark::DoNotOptimize(r.text.data());
      if (r.stopped) m = orzo::StopMatcher(kStops);
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * w.deltas.size()));
}
BENCHMARK(BM_StopMatcherPush);

void BM_DetokenizerThenStopMatcher(benchmark::State& state) {
  const Workload& w = workload();
  for (auto _ : state) {
    orzo::Detokenizer d(w.table);
    orzo::StopMatcher m(kStops);
    for (const int32_t id : w.ids) {
      const orzo::StopMatcher::Result r = m.push(d.push(id));
      benchmark::DoNotOptimize(r.text.data());
      if (r.stopped) m = orzo::StopMatcher(kStops);
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * w.ids.size()));
}
BENCHMARK(BM_DetokenizerThenStopMatcher);

void BM_Decode(benchmark::State& state) {
  const Workload& w = workload();
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = orzo::decode(w.table, w.ids.data(), w.ids.size(), true);
    bytes += text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * w.ids.size()));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_Decode);

}  // namespace

BENCHMARK_MAIN();
