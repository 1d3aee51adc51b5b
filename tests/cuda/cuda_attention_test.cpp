// GPU paged attention (decode with split-K, and prefill tiles) against its CPU twin,
// cpu::paged_attention over the same K/V rounded to the storage type. The cache is laid out to
// catch stray reads: block ids shuffled, blocks no sequence owns and the slots past each
// context filled with NaN, and block-table entries past a sequence's end pointing at such
// blocks; any read of them turns an output into NaN, which never passes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "kernels/cuda/attention.hpp"
#include "tests/support/cuda_harness.hpp"

namespace orzo {
namespace {

using cuda::Elem;
using test::DeviceBuffer;

struct Shape {
  int32_t heads, kv_heads, head_dim;
  int32_t block_size = 16;
  int32_t window = 0;  // sliding window; 0: none
  float scale = 0;     // of the scores; 0: 1 / sqrt(head_dim)
  float softcap = 0;   // of the scores; 0: none

  float score_scale() const { return scale > 0 ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim)); }
};

std::string describe(const Shape& s) {
  std::ostringstream out;
  out << s.heads << " heads, " << s.kv_heads << " kv heads, head_dim " << s.head_dim << ", block_size "
      << s.block_size << ", window " << s.window << ", scale " << s.score_scale() << ", softcap " << s.softcap;
  return out.str();
}

// A row of a step: its sequence and position; a negative position is a padding row.
struct Row {
  int32_t seq, pos;
};

// Sequences' K/V in a paged cache, on the host (the CPU twin's KvCache, f32) and on the device
// (the same values as `elem`), with the block tables of both.
class Scene {
 public:
  // contexts[s]: the positions of sequence s whose K/V are in the cache.
  Scene(Elem elem, const Shape& shape, const std::vector<int32_t>& contexts, uint32_t seed)
      : elem_(elem), shape_(shape), rng_(seed) {
    const int32_t bs = shape.block_size;
    const int64_t kv_dim = int64_t{shape.kv_heads} * shape.head_dim;
    int32_t used = 0, widest = 0;
    for (int32_t c : contexts) {
      used += (c + bs - 1) / bs;
      widest = std::max(widest, (c + bs - 1) / bs);
    }
    constexpr int32_t kUnused = 5;  // blocks no sequence owns
    const int32_t num_blocks = used + kUnused;
    stride_ = widest + 2;  // table entries past every sequence's end
    cache_ = std::make_unique<KvCache>(1, num_blocks, bs, kv_dim);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> keys(static_cast<size_t>(num_blocks) * bs * kv_dim, nan), values = keys;

    std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng_);
    const std::vector<int32_t> unused(ids.end() - kUnused, ids.end());
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    auto next = ids.begin();
    for (int32_t c : contexts) {
      const int32_t blocks = (c + bs - 1) / bs;
      tables_.emplace_back(next, next + blocks);
      next += blocks;
      for (int32_t i = 0; i < stride_; ++i)
        flat_tables_.push_back(i < blocks ? tables_.back()[static_cast<size_t>(i)] : unused[static_cast<size_t>(i) % kUnused]);
      for (int32_t p = 0; p < c; ++p) {
        const int64_t slot = int64_t{tables_.back()[static_cast<size_t>(p / bs)]} * bs + p % bs;
        for (int64_t i = 0; i < kv_dim; ++i) {
          keys[static_cast<size_t>(slot * kv_dim + i)] = rounded(uniform(rng_));
          values[static_cast<size_t>(slot * kv_dim + i)] = rounded(uniform(rng_));
        }
      }
    }
    for (int32_t b = 0; b < num_blocks; ++b)
      for (int32_t s = 0; s < bs; ++s) {
        const size_t at = (static_cast<size_t>(b) * bs + s) * kv_dim;
        cache_->write(0, b, s, keys.data() + at, values.data() + at);
      }
    k_dev_ = std::make_unique<DeviceBuffer<uint16_t>>(test::to_elem(elem, keys));
    v_dev_ = std::make_unique<DeviceBuffer<uint16_t>>(test::to_elem(elem, values));
    tables_dev_ = std::make_unique<DeviceBuffer<int32_t>>(flat_tables_);
  }

  // Queries large enough that softmax is far from uniform, so that a key too many or too few shows.
  std::vector<float> queries(size_t rows) {
    std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
    std::vector<float> q(rows * static_cast<size_t>(shape_.heads) * shape_.head_dim);
    for (float& x : q) x = uniform(rng_);
    return q;
  }

  // cpu::paged_attention over the rows that are not padding; zeros for those that are.
  std::vector<float> cpu(const std::vector<Row>& rows, const std::vector<float>& q) {
    const size_t width = static_cast<size_t>(shape_.heads) * shape_.head_dim;
    ForwardBatch batch;
    batch.block_tables = tables_;
    std::vector<float> q_real;
    std::vector<size_t> real;
    for (size_t r = 0; r < rows.size(); ++r) {
      if (rows[r].pos < 0) continue;
      const int32_t token = 0;
      batch.add_chunk(rows[r].seq, &token, 1, rows[r].pos, false);
      q_real.insert(q_real.end(), q.begin() + static_cast<std::ptrdiff_t>(r * width),
                    q.begin() + static_cast<std::ptrdiff_t>((r + 1) * width));
      real.push_back(r);
    }
    std::vector<float> out_real(q_real.size()), out(q.size(), 0.0f);
    cpu::AttentionShape shape{shape_.heads, shape_.kv_heads, shape_.head_dim, std::nullopt, shape_.score_scale(),
                              shape_.softcap};
    if (shape_.window > 0) shape.sliding_window = shape_.window;
    ThreadPool pool(4);
    cpu::paged_attention(q_real.data(), batch, *cache_, cpu::KvPlace{}, shape, out_real.data(), pool);
    for (size_t i = 0; i < real.size(); ++i)
      std::copy_n(out_real.begin() + static_cast<std::ptrdiff_t>(i * width), width,
                  out.begin() + static_cast<std::ptrdiff_t>(real[i] * width));
    return out;
  }

  // The kernels' inputs for `rows`, device buffers included; outputs come back as f32.
  class Step {
   public:
    Step(const Scene& scene, const std::vector<Row>& rows, const std::vector<float>& q)
        : q_(q), seqs_(seq_column(rows)), positions_(pos_column(rows)), out_(q.size()) {
      args.elem = scene.elem_;
      args.q = q_.get();
      args.k_cache = scene.k_dev_->get();
      args.v_cache = scene.v_dev_->get();
      args.block_tables = scene.tables_dev_->get();
      args.table_stride = scene.stride_;
      args.block_size = scene.shape_.block_size;
      args.seq_of_row = seqs_.get();
      args.positions = positions_.get();
      args.rows = static_cast<int32_t>(rows.size());
      args.num_heads = scene.shape_.heads;
      args.num_kv_heads = scene.shape_.kv_heads;
      args.head_dim = scene.shape_.head_dim;
      args.sliding_window = scene.shape_.window;
      args.scale = scene.shape_.score_scale();
      args.softcap = scene.shape_.softcap;
      args.out = out_.get();
    }

    std::vector<float> decode(int32_t splits) {
      DeviceBuffer<unsigned char> workspace(
          cuda::decode_workspace_bytes(args.rows, args.num_heads, args.head_dim, splits));
      poison_output();
      cuda::paged_attention_decode(args, splits, workspace.get(), nullptr);
      return output();
    }

    std::vector<float> prefill(const ForwardBatch& plan_batch) {
      const std::vector<cuda::AttentionTile> tiles = cuda::plan_prefill_tiles(plan_batch);
      DeviceBuffer<cuda::AttentionTile> tiles_dev(tiles);
      poison_output();
      cuda::paged_attention_prefill(args, tiles_dev.get(), static_cast<int32_t>(tiles.size()), nullptr);
      return output();
    }

    // All ones is NaN in bf16 and f16: an output the kernel leaves unwritten never passes.
    void poison_output() { cuda::check(cudaMemset(out_.get(), 0xff, out_.bytes()), "cudaMemset"); }
    std::vector<float> output() const { return test::from_elem(args.elem, out_.download()); }

    // New positions for the same rows, in place, as a decode step's graph sees them.
    void set_positions(const std::vector<Row>& rows) {
      const std::vector<int32_t> pos = pos_column(rows);
      cuda::check(cudaMemcpy(positions_.get(), pos.data(), positions_.bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
    }

    cuda::PagedAttentionArgs args;

   private:

    static std::vector<int32_t> seq_column(const std::vector<Row>& rows) {
      std::vector<int32_t> out;
      for (const Row& r : rows) out.push_back(r.seq);
      return out;
    }
    static std::vector<int32_t> pos_column(const std::vector<Row>& rows) {
      std::vector<int32_t> out;
      for (const Row& r : rows) out.push_back(r.pos);
      return out;
    }

    DeviceBuffer<float> q_;
    DeviceBuffer<int32_t> seqs_, positions_;
    DeviceBuffer<uint16_t> out_;
  };

 private:
  float rounded(float v) const { return test::from_elem(elem_, test::to_elem(elem_, v)); }

  Elem elem_;
  Shape shape_;
  std::mt19937 rng_;
  int32_t stride_ = 0;
  std::unique_ptr<KvCache> cache_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<int32_t> flat_tables_;
  std::unique_ptr<DeviceBuffer<uint16_t>> k_dev_, v_dev_;
  std::unique_ptr<DeviceBuffer<int32_t>> tables_dev_;
};

// The batch plan_prefill_tiles sees for `rows`.
ForwardBatch plan_batch(const std::vector<Row>& rows) {
  ForwardBatch b;
  for (const Row& r : rows) {
    b.positions.push_back(r.pos);
    b.seq_index.push_back(r.seq);
    b.tokens.push_back(0);
  }
  return b;
}

// Rounding the f32 result to the storage type moves it by at most half an ulp: 2^-8 of its
// magnitude for bf16 (8 significant bits), 2^-11 for f16 (11).
double half_ulp(Elem e) { return e == Elem::bf16 ? 0x1p-8 : 0x1p-11; }

// The GPU's f32 result and the CPU's differ by summation order, FMA contraction and exp2
// implementation. Scores reach |s| ~ 20 in base 2, where an f32 ulp is 2^-19 ~ 2e-6; a few
// ulps of score error (~6e-6) change a weight by that times ln 2, and the output, a weighted
// mean of values in [-1, 1], by at most twice that: ~1e-5. 5e-5 leaves several times that; a
// key seen or missed by mistake moves outputs by ~1/context of the values' spread, far more at
// the short contexts the tests include.
constexpr double kF32Slack = 5e-5;

// Every element of `got` within rounding of `want`: |got - want| <= half_ulp * |want| + slack.
// A NaN never passes. Reports the worst element and how many missed.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, Elem elem, const Shape& shape,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size());
  const size_t width = static_cast<size_t>(shape.heads) * shape.head_dim;
  size_t misses = 0, worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    const double tol = half_ulp(elem) * std::abs(want[i]) + kF32Slack;
    if (!(err <= tol)) {
      ++misses;
      const double excess = std::isnan(err) ? std::numeric_limits<double>::infinity() : err - tol;
      if (excess > worst_excess) {
        worst_excess = excess;
        worst = i;
      }
    }
  }
  EXPECT_EQ(misses, 0u) << what << ": worst at row " << worst / width << ", head " << (worst % width) / shape.head_dim
                        << ", dim " << worst % shape.head_dim << ": " << got[worst] << " vs " << want[worst];
}

// Two GPU results, each rounded from f32 values that differ by summation order.
void expect_agree(const std::vector<float>& a, const std::vector<float>& b, Elem elem, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  size_t misses = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double tol = half_ulp(elem) * (std::abs(a[i]) + std::abs(b[i])) + kF32Slack;
    if (!(std::abs(static_cast<double>(a[i]) - b[i]) <= tol) && misses++ == 0) first = i;
  }
  EXPECT_EQ(misses, 0u) << what << ": first at element " << first << ": " << a[first] << " vs " << b[first];
}

class CudaAttention : public testing::TestWithParam<Elem> {};

// Shapes of the models the runtime serves (stories260K: 8 heads over 4, head_dim 8; Llama 3.2
// 1B: 32 over 8, 64; 8B: 32 over 8, 128), GQA ratios 1, 4 and 8, an odd block size, a window,
// and head_dim 256 (whose prefill needs passes over its 128 queries a tile). Then soft-capped
// scores: a cap of 2 (the Gemma 2 fixture's), small enough that the tanh bends most scores,
// and Gemma 2 27B's head (head_dim 128, scale 144^-1/2, cap 50) with a window.
const std::vector<Shape> kShapes = {
    {8, 4, 8}, {4, 4, 64}, {8, 2, 64}, {16, 2, 128}, {8, 1, 128, 5}, {4, 4, 64, 16, 100}, {16, 2, 256, 16, 300},
    {8, 2, 64, 16, 0, 0, 2.0f}, {8, 4, 128, 16, 100, 1.0f / 12, 50.0f},
};

// Decode rows with ragged contexts (1, 2, 17, 300, 1100: splits of 8 leave the short ones
// mostly empty and cut the long one into several) and padding rows among them.
TEST_P(CudaAttention, DecodeMatchesCpu) {
  ORZO_REQUIRE_GPU();
  const Elem elem = GetParam();
  const std::vector<int32_t> contexts = {17, 1, 1100, 2, 300};
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(describe(shape));
    Scene scene(elem, shape, contexts, 7);
    std::vector<Row> rows;
    for (int32_t s = 0; s < static_cast<int32_t>(contexts.size()); ++s) {
      rows.push_back({s, contexts[static_cast<size_t>(s)] - 1});
      if (s == 1 || s == 3) rows.push_back({0, -1});
    }
    const std::vector<float> q = scene.queries(rows.size());
    const std::vector<float> want = scene.cpu(rows, q);
    Scene::Step step(scene, rows, q);
    for (int32_t splits : {1, 3, 8, cuda::kMaxDecodeSplits}) {
      SCOPED_TRACE("splits " + std::to_string(splits));
      expect_close(step.decode(splits), want, elem, shape, "decode");
    }
  }
}

// The split count the backend would pick, on this device.
TEST_P(CudaAttention, DecodeWithPlannedSplitsMatchesCpu) {
  ORZO_REQUIRE_GPU();
  const Elem elem = GetParam();
  const Shape shape{32, 8, 64};
  const std::vector<int32_t> contexts = {4000, 1, 600, 2500};
  Scene scene(elem, shape, contexts, 8);
  std::vector<Row> rows;
  for (int32_t s = 0; s < static_cast<int32_t>(contexts.size()); ++s) rows.push_back({s, contexts[static_cast<size_t>(s)] - 1});
  const std::vector<float> q = scene.queries(rows.size());
  const int32_t splits = cuda::decode_splits(static_cast<int32_t>(rows.size()), shape.kv_heads,
                                             cuda::device_properties(0).sm_count, 4000);
  EXPECT_GT(splits, 1);
  Scene::Step step(scene, rows, q);
  expect_close(step.decode(splits), scene.cpu(rows, q), elem, shape, "decode");
}

// A mixed step: two prefill chunks starting mid-sequence (37 rows, so tiles of 16, 16 and 5;
// and 20), decode rows, and a padding row between them.
TEST_P(CudaAttention, PrefillMatchesCpu) {
  ORZO_REQUIRE_GPU();
  const Elem elem = GetParam();
  const std::vector<int32_t> contexts = {87, 1000, 320, 1, 33};
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(describe(shape));
    Scene scene(elem, shape, contexts, 9);
    std::vector<Row> rows;
    rows.push_back({1, 999});
    for (int32_t p = 50; p < 87; ++p) rows.push_back({0, p});
    rows.push_back({3, 0});
    rows.push_back({0, -1});
    for (int32_t p = 300; p < 320; ++p) rows.push_back({2, p});
    rows.push_back({4, 32});
    const std::vector<float> q = scene.queries(rows.size());
    Scene::Step step(scene, rows, q);
    expect_close(step.prefill(plan_batch(rows)), scene.cpu(rows, q), elem, shape, "prefill");
  }
}

// Decode rows through both kernels: the same attention, summed in a different order.
TEST_P(CudaAttention, DecodeAgreesWithPrefill) {
  ORZO_REQUIRE_GPU();
  const Elem elem = GetParam();
  const std::vector<int32_t> contexts = {1, 700, 33, 2, 1500};
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(describe(shape));
    Scene scene(elem, shape, contexts, 10);
    std::vector<Row> rows;
    for (int32_t s = 0; s < static_cast<int32_t>(contexts.size()); ++s) rows.push_back({s, contexts[static_cast<size_t>(s)] - 1});
    rows.push_back({2, -1});
    const std::vector<float> q = scene.queries(rows.size());
    Scene::Step step(scene, rows, q);
    const std::vector<float> prefill = step.prefill(plan_batch(rows));
    for (int32_t splits : {1, 5}) {
      SCOPED_TRACE("splits " + std::to_string(splits));
      expect_agree(step.decode(splits), prefill, elem, "decode vs prefill");
    }
  }
}

// A decode step captured once in a CUDA graph serves later steps: contexts and positions are
// read on the device, so the replay after each row moves on sees the longer contexts.
TEST_P(CudaAttention, DecodeReplaysFromAGraph) {
  ORZO_REQUIRE_GPU();
  const Elem elem = GetParam();
  const Shape shape{8, 2, 64};
  const std::vector<int32_t> contexts = {40, 700, 3};
  Scene scene(elem, shape, contexts, 12);
  std::vector<Row> rows = {{0, 30}, {1, 600}, {2, 0}};
  const std::vector<float> q = scene.queries(rows.size());
  Scene::Step step(scene, rows, q);
  constexpr int32_t kSplits = 4;
  DeviceBuffer<unsigned char> workspace(cuda::decode_workspace_bytes(step.args.rows, shape.heads, shape.head_dim, kSplits));

  cudaStream_t stream = nullptr;
  cuda::check(cudaStreamCreate(&stream), "cudaStreamCreate");
  cudaGraph_t graph = nullptr;
  cuda::check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  cuda::paged_attention_decode(step.args, kSplits, workspace.get(), stream);
  cuda::check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  cuda::check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (int step_no = 0; step_no < 3; ++step_no) {
    SCOPED_TRACE("step " + std::to_string(step_no));
    step.set_positions(rows);
    step.poison_output();
    cuda::check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    expect_close(step.output(), scene.cpu(rows, q), elem, shape, "graph replay");
    for (Row& r : rows) r.pos += 1;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST_P(CudaAttention, BadShapesAreRefused) {
  ORZO_REQUIRE_GPU();
  Scene scene(GetParam(), Shape{8, 4, 8}, {3}, 11);
  const std::vector<Row> rows = {{0, 2}};
  Scene::Step step(scene, rows, scene.queries(1));
  cuda::PagedAttentionArgs bad = step.args;
  bad.head_dim = 7;
  EXPECT_THROW(cuda::paged_attention_decode(bad, 1, nullptr, nullptr), std::invalid_argument);
  bad = step.args;
  bad.num_heads = 6;  // not a multiple of 4 kv heads
  EXPECT_THROW(cuda::paged_attention_decode(bad, 1, nullptr, nullptr), std::invalid_argument);
  bad = step.args;
  bad.head_dim = 258;
  EXPECT_THROW(cuda::paged_attention_decode(bad, 1, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::paged_attention_decode(step.args, 0, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::paged_attention_decode(step.args, cuda::kMaxDecodeSplits + 1, nullptr, nullptr),
               std::invalid_argument);
  EXPECT_THROW(cuda::paged_attention_decode(step.args, 2, nullptr, nullptr), std::invalid_argument);  // no workspace
  EXPECT_THROW(cuda::paged_attention_prefill(step.args, nullptr, 1, nullptr), std::invalid_argument);
  bad = step.args;
  bad.softcap = -1.0f;
  EXPECT_THROW(cuda::paged_attention_decode(bad, 1, nullptr, nullptr), std::invalid_argument);
  bad.softcap = std::numeric_limits<float>::infinity();
  EXPECT_THROW(cuda::paged_attention_decode(bad, 1, nullptr, nullptr), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Elems, CudaAttention, testing::Values(Elem::bf16, Elem::f16),
                         [](const testing::TestParamInfo<Elem>& elem) { return cuda::elem_name(elem.param); });

}  // namespace
}  // namespace orzo
