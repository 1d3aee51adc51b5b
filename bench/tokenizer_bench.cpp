// Encoding speed of each tokenizer family on the tokenizer corpus, one text at a time on
// one thread (how a server tokenizes requests). bench/tokenizer_bench.py runs this beside
// HF `tokenizers` and records both.
//
//   tokenizer_bench --corpus=tests/fixtures/tokenizer/corpus.jsonl NAME=MODEL_PATH... [benchmark flags]
//
// MODEL_PATH is anything Tokenizer::for_model takes (HF dir, .gguf, .model).
#include <benchmark/benchmark.h>

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/tokenizer/tokenizer.hpp"

namespace {

std::vector<std::string> read_corpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::vector<std::string> texts;
  for (std::string line; std::getline(in, line);) texts.push_back(nlohmann::json::parse(line).get<std::string>());
  return texts;
}

void encode_corpus(benchmark::State& state, const orzo::Tokenizer& tok, const std::vector<std::string>& texts) {
  int64_t bytes = 0, tokens = 0;
  for (const auto& t : texts) bytes += static_cast<int64_t>(t.size());
  for (auto _ : state) {
    tokens = 0;
    for (const auto& t : texts) {
      const auto ids = tok.encode(t, false);
      tokens += static_cast<int64_t>(ids.size());
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["tokens_per_pass"] = static_cast<double>(tokens);
}

}  // namespace

int main(int argc, char** argv) {
  std::string corpus_path;
  std::vector<std::pair<std::string, std::string>> models;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--corpus=", 0) == 0) {
      corpus_path = a.substr(9);
    } else if (a.rfind("--", 0) != 0 && a.find('=') != std::string::npos) {
      models.emplace_back(a.substr(0, a.find('=')), a.substr(a.find('=') + 1));
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (corpus_path.empty() || models.empty()) {
    std::cerr << "usage: tokenizer_bench --corpus=CORPUS.jsonl NAME=MODEL_PATH... [benchmark flags]\n";
    return 2;
  }
  const auto texts = read_corpus(corpus_path);
  std::vector<std::unique_ptr<orzo::Tokenizer>> tokenizers;
  for (const auto& [name, path] : models) {
    tokenizers.push_back(std::make_unique<orzo::Tokenizer>(orzo::Tokenizer::for_model(path)));
    const orzo::Tokenizer* tok = tokenizers.back().get();
    benchmark::RegisterBenchmark(("encode/" + name).c_str(), [tok, &texts](benchmark::State& st) { encode_corpus(st, *tok, texts); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(1.0);
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
