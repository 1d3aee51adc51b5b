// What an output constraint costs the sampler, per token of one sequence, at the Qwen
// vocabulary (151,936 ids) and at SmolLM2's (49,152), for a 10-property JSON schema (a byte
// DFA) and, named .../any_json, for a json_object response (a pushdown automaton: its values
// nest as they like):
//   mask/...:         looking up the state's mask and applying it to a row of logits (the
//                     per-token cost once a state's mask is built: the median token);
//   first_visit/...:  building a state's mask, a walk of the vocabulary's trie (the first time
//                     any sequence reaches that state of that constraint);
//   sample/... and sample_masked/...: a whole temperature-1 draw without and with the mask,
//                     so the mask's share of a draw shows beside it;
//   compile/...:      compiling a constraint to its automaton, or refusing it (what a request
//                     with it costs the server before it is queued): the 10-property schema,
//                     40 optional properties (the costliest realistic schema measured) and a
//                     regex past ByteDfa::kMaxWork.
// The tokens walked are a fixed random path through the constraint (allowed tokens, seeded).
//
//   grammar_bench [--shared=../shared] [benchmark flags]
#include <benchmark/benchmark.h>

#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "actors/output_constraints.hpp"
#include "grammar/constraint.hpp"
#include "grammar/grammar_error.hpp"
#include "runtime/model_config.hpp"
#include "runtime/sampler.hpp"
#include "text/tokenizer/tokenizer.hpp"

namespace {

using namespace orzo;

const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string","maxLength":24},"age":{"type":"integer","minimum":0,"maximum":130},
  "email":{"type":"string","format":"email"},"active":{"type":"boolean"},"score":{"type":"number"},
  "tags":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":4},
  "city":{"type":"string","maxLength":20},"zip":{"type":"string","pattern":"^[0-9]{5}$"},
  "kind":{"enum":["user","admin","guest"]},"note":{"type":["string","null"],"maxLength":40}},
  "required":["name","age","email","active","score","tags","city","zip","kind","note"],"additionalProperties":false})";

struct Vocab {
  std::string name;
  std::shared_ptr<grammar::ConstraintCache> cache;
  int32_t size = 0;
  std::shared_ptr<const grammar::CompiledConstraint> schema;
  std::vector<int32_t> states;  // a random path's states, token after token
};

std::vector<Vocab>& vocabularies() {
  static std::vector<Vocab> v;
  return v;
}

Vocab load(const std::string& name, const std::string& tokenizer_path, int32_t model_vocab, const OutputConstraint& constraint) {
  const Tokenizer tok = Tokenizer::for_model(tokenizer_path);
  ModelConfig cfg;
  cfg.vocab_size = model_vocab;
  cfg.eos_token_ids = tok.eos_ids();
  Vocab v{name, output_constraints(tok, cfg), model_vocab, nullptr, {}};
  v.schema = v.cache->get(constraint);
  std::mt19937 rng(7);
  int32_t state = v.schema->start();
  for (int step = 0; step < 400; ++step) {
    v.states.push_back(state);
    const auto mask = v.schema->mask(state);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < model_vocab; ++id)
      if (mask->allows(id) && !v.schema->is_eos(id)) allowed.push_back(id);
    if (allowed.empty()) break;
    state = v.schema->advance(state, allowed[rng() % allowed.size()]);
  }
  return v;
}

void mask(benchmark::State& s, const Vocab& v) {
  std::vector<float> row(static_cast<size_t>(v.size), 0.5f);
  size_t i = 0;
  for (auto _ : s) {
    const auto m = v.schema->mask(v.states[i++ % v.states.size()]);
    apply_mask(*m, row.data(), v.size);
    benchmark::DoNotOptimize(row.data());
  }
  s.counters["states"] = static_cast<double>(v.states.size());
}

void first_visit(benchmark::State& s, const Vocab& v) {
  size_t i = 0;
  for (auto _ : s) {
    // A fresh compilation each time, so every mask is built, not found.
    s.PauseTiming();
    auto fresh = std::make_shared<grammar::CompiledConstraint>(v.schema->automaton(), v.cache->vocabulary());
    const int32_t state = v.states[i++ % v.states.size()];
    s.ResumeTiming();
    benchmark::DoNotOptimize(fresh->mask(state));
  }
}

void sample(benchmark::State& s, const Vocab& v, bool masked) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(v.size));
  for (auto& x : logits) x = normal(rng);
  std::vector<float> row(logits.size());
  SamplingParams p;
  p.seed = 1;
  Sampler sampler(p);
  size_t i = 0;
  for (auto _ : s) {
    std::memcpy(row.data(), logits.data(), logits.size() * sizeof(float));
    const auto m = masked ? v.schema->mask(v.states[i++ % v.states.size()]) : nullptr;
    benchmark::DoNotOptimize(sampler.sample(row.data(), v.size, nullptr, 0, m.get()));
  }
}

// Compiles (or refuses) the constraint once per iteration.
void compile(benchmark::State& state, const OutputConstraint& c) {
  for (auto _ : state) {
    try {
      benchmark::DoNotOptimize(grammar::compile_automaton(c));
    } catch (const grammar::GrammarError&) {
    }
  }
}

std::string optional_properties(int n) {
  std::string properties;
  for (int i = 0; i < n; ++i) properties += (i ? ",\"p" : "\"p") + std::to_string(i) + "\":{\"type\":\"integer\"}";
  return "{\"type\":\"object\",\"properties\":{" + properties + "}}";
}

}  // namespace

int main(int argc, char** argv) {
  std::string shared = "../shared";
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--shared=", 9) == 0)
      shared = argv[i] + 9;
    else
      rest.push_back(argv[i]);
  }
  auto& vocabs = vocabularies();
  const OutputConstraint schema{OutputConstraint::Kind::json_schema, kSchema, false};
  const OutputConstraint any_json{OutputConstraint::Kind::json_object, "", false};
  const std::string qwen = shared + "/models/tokenizers/qwen3";
  const std::string smollm2 = shared + "/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
  vocabs.push_back(load("qwen", qwen, 151936, schema));
  vocabs.push_back(load("smollm2", smollm2, 49152, schema));
  vocabs.push_back(load("qwen/any_json", qwen, 151936, any_json));
  vocabs.push_back(load("smollm2/any_json", smollm2, 49152, any_json));
  for (const auto& v : vocabs) {
    benchmark::RegisterBenchmark(("mask/" + v.name).c_str(), [&v](benchmark::State& s) { mask(s, v); });
    benchmark::RegisterBenchmark(("first_visit/" + v.name).c_str(), [&v](benchmark::State& s) { first_visit(s, v); });
    if (v.name.find('/') != std::string::npos) continue;  // a draw costs the same whatever the mask
    benchmark::RegisterBenchmark(("sample/" + v.name).c_str(), [&v](benchmark::State& s) { sample(s, v, false); });
    benchmark::RegisterBenchmark(("sample_masked/" + v.name).c_str(), [&v](benchmark::State& s) { sample(s, v, true); });
  }
  static const OutputConstraint compiled[] = {
      schema, {OutputConstraint::Kind::json_schema, optional_properties(40), false},
      {OutputConstraint::Kind::regex, "(.?){1000}a{1000}", false}};
  static const char* const names[] = {"compile/schema_10_properties", "compile/schema_40_optional_properties",
                                      "compile/regex_refused_(.?){1000}a{1000}"};
  for (size_t i = 0; i < std::size(compiled); ++i)
    benchmark::RegisterBenchmark(names[i], [i](benchmark::State& s) { compile(s, compiled[i]); })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(3);
  int count = static_cast<int>(rest.size());
  benchmark::Initialize(&count, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
