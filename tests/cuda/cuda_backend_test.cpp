// The CUDA backend against its twin, the CPU backend: the same model and the same steps
// (prefill chunks that start mid-sequence, decode rows, block tables with holes), logits within
// bf16 tolerance and the same greedy tokens; decode graphs, a split over two GPU stages and
// sampling on the device each against the plain path. Needs a GPU; skips, saying why, without.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/batch_sampler.hpp"
#include "runtime/cpu_backend.hpp"
#include "runtime/cuda/cuda_backend.hpp"
#include "runtime/model.hpp"
#include "tests/support/cuda_harness.hpp"
#include "tests/support/model_harness.hpp"

namespace orzo::cuda {
namespace {

const std::string kStories = std::string(ORZO_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
constexpr int32_t kBlocks = 24;       // the pool; tables below use some ids and skip others
constexpr int32_t kMaxModelLen = 64;

// With a KV layout of several groups, each group's tables draw on kBlocks ids of their own.
std::unique_ptr<CudaBackend> gpu_stage(const std::shared_ptr<const Model>& model, LayerRange range = {},
                                       bool graphs = true, const KvLayout& layout = {}) {
  CudaBackend::Options o;
  o.range = range;
  o.max_rows = 96;
  o.max_seqs = 8;
  o.max_model_len = kMaxModelLen;
  o.cuda_graphs = graphs;
  o.kv_layout = layout;
  auto stage = std::make_unique<CudaBackend>(model, o);
  stage->allocate_kv(kBlocks * std::max(layout.groups(), 1));
  return stage;
}

std::unique_ptr<CpuBackend> cpu_stage(const std::shared_ptr<const Model>& model, const KvLayout& layout = {}) {
  CpuBackend::Options o;
  o.kv_blocks = kBlocks * std::max(layout.groups(), 1);
  o.threads = 2;
  o.kv_layout = layout;
  return std::make_unique<CpuBackend>(model, o);
}

// The model's layers with their sliding ones apart (core/kv_layout.hpp), at kMaxModelLen.
KvLayout hybrid_layout(const ModelConfig& cfg) {
  std::vector<int64_t> windows;
  for (int64_t l = 0; l < cfg.num_layers; ++l) windows.push_back(cfg.window_of(l).value_or(0));
  return KvLayout::of(windows, kMaxModelLen);
}

// Three sequences whose tables are out of order and leave blocks unused: [0] prefills 20
// tokens then decodes, [1] prefills in two chunks (the second starts at 10) while the others
// decode, [2] prefills 5 then decodes. Then ten decode steps of all three, the tokens fed back
// being the CPU's greedy choices. Under a layout of several groups, group g's tables are group
// 0's ids moved by g * kBlocks, sliding groups' given back before each step's windows.
class StepScript {
 public:
  explicit StepScript(int64_t vocab, KvLayout layout = KvLayout{{}, {}, {0}}) : vocab_(vocab), layout_(std::move(layout)) {
    std::mt19937 rng(17);
    const int prompt_len[3] = {20, 30, 5};
    for (int s = 0; s < 3; ++s)
      for (int i = 0; i < prompt_len[s]; ++i)
        seq_[s].push_back(static_cast<int32_t>(1 + rng() % static_cast<uint32_t>(vocab - 1)));
  }

  // Runs every step on both pipelines (each a list of stages, front to back) and calls
  // check(cpu logits, gpu logits, step) after each.
  template <typename Check>
  void run(const std::vector<LayerBackend*>& cpu, const std::vector<LayerBackend*>& gpu, const Check& check) {
    const std::vector<std::vector<int32_t>> tables = {{7, 2, 11, 19}, {0, 5, 9, 14}, {3, 22, 13, 1}};
    std::vector<int32_t> len = {0, 0, 0};
    auto step = [&](const std::vector<std::pair<int, int32_t>>& chunks, int index) {
      ForwardBatch b;
      b.block_tables = tables;
      b.kv_groups = layout_.groups();
      for (int32_t g = 1; g < layout_.groups(); ++g)
        for (size_t seq = 0; seq < tables.size(); ++seq) {
          std::vector<int32_t> table = tables[seq];
          const int32_t first = first_block_read(layout_.windows[static_cast<size_t>(g)], len[seq], kDefaultBlockSize);
          for (size_t j = 0; j < table.size(); ++j) table[j] = static_cast<int32_t>(j) < first ? kNoBlock : table[j] + g * kBlocks;
          b.block_tables.push_back(std::move(table));
        }
      for (const auto& [seq, count] : chunks) {
        b.add_chunk(seq, seq_[static_cast<size_t>(seq)].data() + len[static_cast<size_t>(seq)], count,
                    len[static_cast<size_t>(seq)], true);
        len[static_cast<size_t>(seq)] += count;
      }
      if (index == 0) b.logit_rows.push_back(3);  // a logit row in mid-chunk too
      const auto want = forward(cpu, b), got = forward(gpu, b);
      ASSERT_EQ(got.size(), want.size());
      check(want, got, index);
      // Decode steps continue with the CPU's greedy token.
      for (size_t i = 0; i < b.logit_rows.size(); ++i) {
        const auto row = static_cast<size_t>(b.logit_rows[i]);
        const auto seq = static_cast<size_t>(b.seq_index[row]);
        if (static_cast<int32_t>(row) != last_row_of(b, b.seq_index[row])) continue;
        auto& tokens = seq_[seq];
        if (static_cast<size_t>(len[seq]) < tokens.size()) continue;  // mid-prompt: the prompt goes on
        const float* l = want.data() + i * static_cast<size_t>(vocab_);
        tokens.push_back(static_cast<int32_t>(std::max_element(l, l + vocab_) - l));
      }
    };
    step({{0, 20}, {1, 10}, {2, 5}}, 0);
    step({{0, 1}, {1, 20}, {2, 1}}, 1);
    for (int i = 0; i < 10; ++i) step({{0, 1}, {1, 1}, {2, 1}}, 2 + i);
  }

 private:
  static int32_t last_row_of(const ForwardBatch& b, int32_t seq) {
    int32_t last = -1;
    for (int32_t r = 0; r < b.rows(); ++r)
      if (b.seq_index[static_cast<size_t>(r)] == seq) last = r;
    return last;
  }
  static std::vector<float> forward(const std::vector<LayerBackend*>& stages, const ForwardBatch& b) {
    std::vector<float> hidden, logits;
    for (auto* s : stages) s->forward(b, hidden, logits);
    return logits;
  }

  int64_t vocab_;
  KvLayout layout_;
  std::vector<int32_t> seq_[3];
};

// bf16 keeps 8 significant bits: each rounding is within 2^-9 relative. Weights and the
// activations into each GEMM are rounded once per layer, so logits stray by a few per cent
// of their scale; an indexing bug strays by their whole scale.
//
// Gemma's fixtures stray further, up to 10 per cent: the embedding is scaled up and each
// block's output is normalized before it joins the residual, so every layer adds terms the
// size of the residual itself, each from bf16 inputs. Rounding, not a bug: the same weights
// stored as f16 (3 more bits) stray 8 to 14 times less. Leaving out any one of Gemma's
// features (the soft caps, local RoPE, embedding scale, post-block norms, attention scale)
// strays by 35 per cent or more.
//
// Phi-3's stray to 5 per cent: LongRope's attention factor (1.26 on cos and sin) sharpens every
// score by 1.6, rounding of q and k with it; the same weights stored as f16 stray 0.4 per
// cent, and the short factors in place of the long ones by the logits' whole scale.
//
// Mixture-of-Experts fixtures keep the 4 per cent for most rows, but a row whose k-th and
// next expert are nearly tied may be routed to the other one once the router's input and
// weights are rounded to bf16: that row, and the later rows of its sequence through the
// cache, stray further (up to 11 per cent on these fixtures). Rounding, not a bug: stored as
// f16 every row of the MoE fixtures is within 0.5 per cent (checked by forcing f16 storage
// while writing this), and a wrong weight, expert or order strays on every row.
float tolerance_of(const std::string& fixture) {
  if (fixture.rfind("gemma", 0) == 0) return 0.15f;
  return fixture.rfind("phi3", 0) == 0 ? 0.07f : 0.04f;
}
bool has_experts(const std::string& fixture) {
  return fixture.rfind("mixtral", 0) == 0 || fixture.find("moe") != std::string::npos;
}
constexpr float kRerouted = 0.15f;      // MoE: what any row may stray, rerouted at a near tie
constexpr double kReroutedShare = 0.2;  // MoE: the share of rows that may stray past tolerance_of

// The largest difference of each logit row, relative to the row's largest logit (at least 1).
void row_differences(const std::vector<float>& want, const std::vector<float>& got, int64_t vocab,
                     std::vector<float>& out) {
  for (size_t row = 0; row * static_cast<size_t>(vocab) < want.size(); ++row) {
    const float* w = want.data() + row * static_cast<size_t>(vocab);
    const float* g = got.data() + row * static_cast<size_t>(vocab);
    float scale = 1, diff = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      scale = std::max(scale, std::abs(w[i]));
      diff = std::max(diff, std::abs(w[i] - g[i]));
    }
    out.push_back(diff / scale);
  }
}

void expect_close(const std::vector<float>& want, const std::vector<float>& got, int64_t vocab, int step,
                  float tolerance) {
  std::vector<float> diffs;
  row_differences(want, got, vocab, diffs);
  for (size_t row = 0; row < diffs.size(); ++row)
    EXPECT_LE(diffs[row], tolerance) << "step " << step << " logit row " << row;
}

class CudaBackendTwin : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaBackendTwin, LogitsMatchTheCpuBackendOnEveryKindOfStep) {
  ORZO_REQUIRE_GPU();
  const std::string path = GetParam() == "stories260K" ? kStories : std::string(ORZO_FIXTURES_DIR) + "/" + GetParam();
  auto model = Model::load(path);
  auto cpu = cpu_stage(model);
  auto gpu = gpu_stage(model);
  StepScript script(model->config().vocab_size);
  const float tolerance = tolerance_of(GetParam());
  std::vector<float> diffs;
  script.run({cpu.get()}, {gpu.get()}, [&](const std::vector<float>& want, const std::vector<float>& got, int step) {
    if (has_experts(GetParam()))
      row_differences(want, got, model->config().vocab_size, diffs);
    else
      expect_close(want, got, model->config().vocab_size, step, tolerance);
  });
  if (has_experts(GetParam())) {
    ASSERT_FALSE(diffs.empty());
    const auto beyond = std::count_if(diffs.begin(), diffs.end(), [&](float d) { return d > tolerance; });
    const float largest = *std::max_element(diffs.begin(), diffs.end());
    std::printf("%s: largest logit difference %.4f of the row's scale, %ld of %zu rows beyond %.2f\n",
                GetParam().c_str(), static_cast<double>(largest), static_cast<long>(beyond), diffs.size(),
                static_cast<double>(tolerance));
    EXPECT_LE(largest, kRerouted);
    EXPECT_LE(static_cast<double>(beyond), kReroutedShare * static_cast<double>(diffs.size()));
  }
  // A stage with expert layers sizes their GEMMs from the routing the host reads back each
  // layer, so its decode steps run eagerly; every other stage replays graphs.
  EXPECT_EQ(gpu->graphs_enabled(), model->config().num_experts == 0);
  if (gpu->graphs_enabled()) {
    EXPECT_GT(gpu->captured_graphs(), 0u) << gpu->graph_failure();
    EXPECT_EQ(gpu->graph_failure(), "");
  } else {
    EXPECT_EQ(gpu->captured_graphs(), 0u);
  }
}

// Safetensors of each architecture (HF's half-split RoPE, Llama 3 scaling, Mistral's window,
// Qwen2's biases, Qwen3's q/k norms; Gemma 2's soft caps, GeGLU, scaled embedding, sandwich
// norms and interleaved windows, Gemma 3's local RoPE; SmolLM3's layers without RoPE; Phi-3's
// fused matrices, partial rotary and LongRope's long factors, past its original 32; the
// experts of Mixtral (renormalized), Qwen2-MoE (not renormalized; the gated shared expert, a
// dense layer between expert layers) and Qwen3-MoE), GGUF (interleaved RoPE; Gemma 3's norms
// stored with their 1 added; Phi-3's factor tensors; stacked experts, and Q8_0 ones dequantized
// on upload), f16 storage, and stories260K.
INSTANTIATE_TEST_SUITE_P(Models, CudaBackendTwin,
                         ::testing::Values("llama", "llama3", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "smollm3",
                                           "phi3", "mixtral", "qwen2moe", "qwen3moe", "llama/model-f32.gguf",
                                           "qwen3/model-f32.gguf", "gemma3/model-f32.gguf", "smollm3/model-f32.gguf",
                                           "phi3/model-f32.gguf", "mixtral/model-f32.gguf", "qwen2moe/model-f32.gguf",
                                           "qwen3moe/model-f32.gguf", "qwen3moe/model-q8_0.gguf", "llama/model-f16.gguf",
                                           "stories260K"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           for (auto& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

// Gemma's sliding layers in tables of their own that give back what falls out of their windows
// (the sequences reach 41 positions, windows are 8): the GPU's logits are the CPU's, with
// graphs and without, and the CPU's are bit for bit those of one table for every layer.
TEST(CudaBackend, SlidingLayersApartGiveTheSameLogits) {
  ORZO_REQUIRE_GPU();
  for (const char* name : {"gemma2", "gemma3"}) {
    SCOPED_TRACE(name);
    auto model = Model::load(std::string(ORZO_FIXTURES_DIR) + "/" + name);
    const KvLayout layout = hybrid_layout(model->config());
    ASSERT_GT(layout.groups(), 1);
    auto flat = cpu_stage(model);
    auto cpu = cpu_stage(model, layout);
    auto gpu = gpu_stage(model, {}, true, layout);
    auto eager = gpu_stage(model, {}, false, layout);
    std::vector<std::vector<float>> want;
    StepScript reference(model->config().vocab_size);
    reference.run({flat.get()}, {flat.get()}, [&](const std::vector<float>& w, const std::vector<float>&, int) { want.push_back(w); });
    StepScript script(model->config().vocab_size, layout);
    script.run({cpu.get()}, {gpu.get()}, [&](const std::vector<float>& w, const std::vector<float>& got, int step) {
      ASSERT_LT(static_cast<size_t>(step), want.size());
      EXPECT_EQ(w, want[static_cast<size_t>(step)]) << "step " << step;
      expect_close(w, got, model->config().vocab_size, step, tolerance_of(name));
    });
    StepScript eager_script(model->config().vocab_size, layout);
    eager_script.run({cpu.get()}, {eager.get()}, [&](const std::vector<float>& w, const std::vector<float>& got, int step) {
      expect_close(w, got, model->config().vocab_size, step, tolerance_of(name));
    });
    EXPECT_GT(gpu->captured_graphs(), 0u) << gpu->graph_failure();
  }
}

// LongRope's short factors where the served context stays within the original one (the phi3
// fixture's 32): the GPU's logits are the CPU's at that context, and far from the long ones.
TEST(CudaBackend, Phi3ShortContextsUseTheShortFactors) {
  ORZO_REQUIRE_GPU();
  const std::string dir = std::string(ORZO_FIXTURES_DIR) + "/phi3";
  const auto prompt =
      nlohmann::json::parse(std::ifstream(dir + "/expected.json")).at("short_context").at("prompt").get<std::vector<int32_t>>();
  auto model = Model::load(dir);
  const int64_t vocab = model->config().vocab_size;
  CudaBackend::Options o;
  o.max_rows = 96;
  o.max_seqs = 16;  // every row of the prompt gives logits
  o.max_model_len = 32;
  CudaBackend gpu(model, o);
  gpu.allocate_kv(kBlocks);
  auto logits_on = [&](LayerBackend& stage) { return orzo::testing::Pipeline({&stage}, 2).prefill_all(0, prompt); };
  const auto got = logits_on(gpu);
  for (const int64_t context : {32, 64}) {
    CpuBackend::Options c;
    c.kv_blocks = kBlocks;
    c.threads = 2;
    c.max_model_len = context;
    CpuBackend cpu(model, c);
    const auto want = logits_on(cpu);
    ASSERT_EQ(got.size(), want.size());
    if (context == 32) {
      expect_close(want, got, vocab, 0, tolerance_of("phi3"));
    } else {  // the long factors: a difference far past bf16's
      EXPECT_GT(orzo::testing::max_abs_diff(want.data(), got.data(), want.size()), 1.0f);
    }
  }
}

TEST(CudaBackend, GreedyStoryEqualsTheCpuBackend) {
  ORZO_REQUIRE_GPU();
  auto model = Model::load(kStories);
  auto cpu = cpu_stage(model);
  auto gpu = gpu_stage(model);
  StepScript script(model->config().vocab_size);
  script.run({cpu.get()}, {gpu.get()}, [&](const std::vector<float>& want, const std::vector<float>& got, int step) {
    const auto vocab = static_cast<size_t>(model->config().vocab_size);
    for (size_t row = 0; row * vocab < want.size(); ++row) {
      const auto w = std::max_element(want.begin() + row * vocab, want.begin() + (row + 1) * vocab) - want.begin();
      const auto g = std::max_element(got.begin() + row * vocab, got.begin() + (row + 1) * vocab) - got.begin();
      EXPECT_EQ(g, w) << "step " << step << " row " << row;
    }
  });
}

TEST(CudaBackend, DecodeGraphsGiveTheEagerLogits) {
  ORZO_REQUIRE_GPU();
  auto model = Model::load(kStories);
  auto eager = gpu_stage(model, {}, false);
  auto graphs = gpu_stage(model, {}, true);
  StepScript script(model->config().vocab_size);
  script.run({eager.get()}, {graphs.get()}, [&](const std::vector<float>& want, const std::vector<float>& got, int step) {
    // Only the split-K partition may differ (the graph pads the table stride).
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-3f * (1 + std::abs(want[i]))) << "step " << step << " at " << i;
  });
  EXPECT_EQ(eager->captured_graphs(), 0u);
  EXPECT_GT(graphs->captured_graphs(), 0u) << graphs->graph_failure();
}

// One sequence decoding from 7 blocks of context to 10: its table outgrows the first stride
// class (8 blocks), so a second graph is captured and each is replayed only for its class.
TEST(CudaBackend, DecodeGraphsFollowAGrowingTableAcrossStrideClasses) {
  ORZO_REQUIRE_GPU();
  auto model = Model::load(kStories);
  const int32_t bs = CudaBackend::Options{}.block_size;
  auto stage = [&](bool graphs) {
    CudaBackend::Options o;
    o.max_rows = 8 * bs;
    o.max_seqs = 4;
    o.max_model_len = 16 * bs;
    o.cuda_graphs = graphs;
    auto s = std::make_unique<CudaBackend>(model, o);
    s->allocate_kv(kBlocks);
    return s;
  };
  auto eager = stage(false), graphs = stage(true);
  const auto vocab = static_cast<long>(model->config().vocab_size);
  const std::vector<int32_t> pool = {23, 4, 17, 0, 9, 12, 2, 20, 6, 15, 11, 1};  // out of order
  std::mt19937 rng(5);
  std::vector<int32_t> tokens(static_cast<size_t>(7 * bs - 3));
  for (auto& t : tokens) t = static_cast<int32_t>(1 + rng() % static_cast<uint32_t>(vocab - 1));
  const auto step = [&](int32_t start, int32_t count) {
    ForwardBatch b;
    const int32_t blocks = (start + count + bs - 1) / bs;
    b.block_tables = {std::vector<int32_t>(pool.begin(), pool.begin() + blocks)};
    b.add_chunk(0, tokens.data() + start, count, start, true);
    std::vector<float> hidden, want, got;
    eager->forward(b, hidden, want);
    hidden.clear();
    graphs->forward(b, hidden, got);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-3f * (1 + std::abs(want[i]))) << "context " << start + count << " at " << i;
    tokens.push_back(static_cast<int32_t>(std::max_element(want.end() - vocab, want.end()) - (want.end() - vocab)));
  };
  step(0, static_cast<int32_t>(tokens.size()));
  while (static_cast<int32_t>(tokens.size()) < 10 * bs) step(static_cast<int32_t>(tokens.size()) - 1, 1);
  EXPECT_GE(graphs->captured_graphs(), 2u) << graphs->graph_failure();
}

// Gemma 3 too: its back stage's layers 2-5 must keep their own windows and RoPE bases (layer
// 5 is its only global one), which are the model's layers, not the stage's. Likewise
// Qwen2-MoE's dense layer 1 is the model's: its front stage has an expert layer and the dense one.
TEST(CudaBackend, TwoStagesEqualOneWhetherHiddenStatesStayOnTheDeviceOrNot) {
  ORZO_REQUIRE_GPU();
  for (const std::string& path : {kStories, std::string(ORZO_FIXTURES_DIR) + "/gemma3",
                                  std::string(ORZO_FIXTURES_DIR) + "/qwen2moe"}) {
    SCOPED_TRACE(path);
    auto model = Model::load(path);
    auto whole = gpu_stage(model);
    auto front = gpu_stage(model, {0, 2}), back = gpu_stage(model, {2, 0});
    back->receive_from(*front);
    auto host_front = gpu_stage(model, {0, 2}), host_back = gpu_stage(model, {2, 0});
    for (const auto& split : {std::vector<LayerBackend*>{front.get(), back.get()},
                              std::vector<LayerBackend*>{host_front.get(), host_back.get()}}) {
      StepScript script(model->config().vocab_size);
      script.run({whole.get()}, split, [&](const std::vector<float>& want, const std::vector<float>& got, int step) {
        for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::abs(want[i]))) << step;
      });
    }
  }
}

// The worker's device path (plans from the BatchSampler, drawn by the kernel) against its host
// path (the same logits drawn by the CPU Sampler), step by step on the same backend.
TEST(CudaBackend, SamplesOnTheDeviceAsTheCpuSamplerDraws) {
  ORZO_REQUIRE_GPU();
  auto model = Model::load(kStories);
  auto gpu = gpu_stage(model);
  const int32_t vocab = static_cast<int32_t>(model->config().vocab_size);
  std::vector<SamplingParams> params(4);
  params[0].temperature = 0;
  params[1].temperature = 0.8f;
  params[1].top_k = 40;
  params[1].seed = 1;
  params[2].temperature = 1.0f;
  params[2].top_p = 0.9f;
  params[2].min_p = 0.05f;
  params[2].repetition_penalty = 1.3f;
  params[2].seed = 2;
  params[2].top_logprobs = 5;
  params[3].temperature = 1.2f;
  params[3].frequency_penalty = 0.5f;
  params[3].presence_penalty = 0.5f;
  params[3].logit_bias = {{10, 5.0f}};
  params[3].seed = 3;
  params[3].logprobs = true;
  BatchSampler host, device;
  std::vector<std::vector<int32_t>> tokens(4);
  std::vector<uint64_t> ids;
  for (uint64_t s = 0; s < 4; ++s) {
    tokens[s] = {1, static_cast<int32_t>(400 + s), 407, 261};
    host.start(s, params[s], tokens[s]);
    device.start(s, params[s], tokens[s]);
    ids.push_back(s);
  }
  int agree = 0, draws = 0;
  for (int step = 0; step < 30; ++step) {
    ForwardBatch b;
    for (int32_t s = 0; s < 4; ++s) {
      b.block_tables.push_back({s * 4, s * 4 + 1, s * 4 + 2, s * 4 + 3});
      const auto& t = tokens[static_cast<size_t>(s)];
      const auto first = step == 0 ? 0 : static_cast<int32_t>(t.size()) - 1;
      b.add_chunk(s, t.data() + first, static_cast<int32_t>(t.size()) - first, first, true);
    }
    std::vector<float> hidden, logits;
    gpu->forward(b, hidden, logits);
    std::vector<SampleResult> want, got;
    host.sample(b, ids, logits.data(), vocab, want);
    std::vector<DrawPlan> plans;
    device.plan(b, ids, plans);
    gpu->forward_and_sample(b, hidden, plans, got);
    ASSERT_EQ(got.size(), 4u);
    for (size_t s = 0; s < 4; ++s) {
      ++draws;
      agree += got[s].token == want[s].token;
      if (s == 0) {
        EXPECT_EQ(got[s].token, want[s].token) << "greedy, step " << step;
      }
      if (params[s].logprobs || params[s].top_logprobs > 0) {
        EXPECT_NEAR(got[s].logprob, want[s].logprob, 1e-4f);
        ASSERT_EQ(got[s].top_logprobs.size(), want[s].top_logprobs.size());
        for (size_t k = 0; k < want[s].top_logprobs.size(); ++k)
          EXPECT_EQ(got[s].top_logprobs[k].token, want[s].top_logprobs[k].token) << "step " << step;
      }
      tokens[s].push_back(want[s].token);
    }
  }
  // Equal draws, but where u lands within float summation rounding of a boundary.
  EXPECT_GE(agree, draws - 2) << agree << " of " << draws;
}

TEST(CudaBackend, RefusesStepsBeyondWhatItWasSizedFor) {
  ORZO_REQUIRE_GPU();
  auto model = Model::load(kStories);
  auto gpu = gpu_stage(model);
  ForwardBatch b;
  b.block_tables = {{0, 1, 2, 3, 4}};  // 80 positions: beyond max_model_len 64
  const int32_t token = 5;
  b.add_chunk(0, &token, 1, 70, true);
  std::vector<float> hidden, logits;
  EXPECT_THROW(gpu->forward(b, hidden, logits), std::invalid_argument);
  ForwardBatch bad;
  bad.block_tables = {{kBlocks}};
  bad.add_chunk(0, &token, 1, 0, true);
  EXPECT_THROW(gpu->forward(bad, hidden, logits), std::invalid_argument);
}

}  // namespace
}  // namespace orzo::cuda
