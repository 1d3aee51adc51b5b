// The elementwise and per-row GPU kernels (embedding, RMSNorm and the post-block norm, bias,
// SwiGLU and GeGLU, the logit soft cap, q/k/v to the paged cache) and the cuBLAS GEMM, each
// against its CPU twin, for both storage types.
// Outputs in the storage type are compared with the twin's f32 result within the rounding
// of that type; f32 outputs within f32 noise, so an element taken from the wrong place fails.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cpu/convert.hpp"
#include "kernels/cpu/geglu.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/swiglu.hpp"
#include "kernels/cpu/tanh.hpp"
#include "kernels/cuda/bias.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/rmsnorm.hpp"
#include "kernels/cuda/rope_cache.hpp"
#include "kernels/cuda/softcap.hpp"
#include "kernels/cuda/swiglu.hpp"
#include "runtime/model_config.hpp"
#include "tests/support/cuda_harness.hpp"

namespace orzo::cuda {
namespace {

using test::DeviceBuffer;
using test::from_elem;
using test::to_elem;

const Elem kElems[] = {Elem::bf16, Elem::f16};

std::vector<float> uniform(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Half a unit in the last place of the storage type, relative, plus room for the f32 noise
// between the two sides (a reduction in another order, a fused multiply-add).
double elem_tolerance(Elem e, float want) {
  const double half_ulp = e == Elem::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  return (half_ulp + 4e-5) * std::fabs(want) + 1e-5;
}

// Reports the first mismatch with its index; counts the rest.
void expect_elem_near(Elem e, const std::vector<uint16_t>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = from_elem(e, got[i]);
    if (std::fabs(static_cast<double>(g) - want[i]) <= elem_tolerance(e, want[i])) continue;
    if (bad++ == 0) ADD_FAILURE() << what << " [" << i << "]: got " << g << ", want " << want[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": mismatches";
}

void expect_f32_near(const std::vector<float>& got, const std::vector<float>& want, double rel, double abs,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(static_cast<double>(got[i]) - want[i]) <= rel * std::fabs(want[i]) + abs) continue;
    if (bad++ == 0) ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << ", want " << want[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": mismatches";
}

DType dtype_of(Elem e) { return e == Elem::bf16 ? DType::BF16 : DType::F16; }

// Unscaled, and scaled by sqrt(hidden) as Gemma's embedding is: the same f32 product as the
// CPU backend's, so equal to the bit.
TEST(CudaKernels, EmbeddingCopiesTableRowsScalesThemAndZeroesPadding) {
  ORZO_REQUIRE_GPU();
  std::mt19937 rng(1);
  const int32_t vocab = 37, hidden = 333;
  const std::vector<int32_t> tokens = {5, 0, -1, 36, 5, 17, -1};
  const auto rows = static_cast<int32_t>(tokens.size());
  for (Elem e : kElems)
    for (float scale : {1.0f, std::sqrt(float(hidden))}) {
      SCOPED_TRACE(std::string(elem_name(e)) + " scale " + std::to_string(scale));
      const std::vector<uint16_t> table = to_elem(e, uniform(size_t(vocab) * hidden, -3, 3, rng));
      DeviceBuffer<uint16_t> d_table(table);
      DeviceBuffer<int32_t> d_tokens(tokens);
      DeviceBuffer<float> x(std::vector<float>(size_t(rows) * hidden, std::nanf("")));
      embed_rows(e, d_table.get(), d_tokens.get(), rows, hidden, scale, x.get(), nullptr);
      const std::vector<float> got = x.download();

      std::vector<float> want(got.size(), 0.0f);
      for (int32_t r = 0; r < rows; ++r)
        if (tokens[r] >= 0)
          cpu::dequantize_row(dtype_of(e), table.data() + size_t(hidden) * tokens[r], hidden, want.data() + size_t(hidden) * r);
      for (float& v : want) v *= scale;
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
    }
}

TEST(CudaKernels, RmsnormMatchesCpuPlainAndGathered) {
  ORZO_REQUIRE_GPU();
  std::mt19937 rng(2);
  const float eps = 1e-5f;
  const int32_t sources = 5;
  const std::vector<int32_t> gather = {4, 0, 4, 2};
  for (Elem e : kElems) {
    for (int32_t n : {64, 2048, 4097}) {
      SCOPED_TRACE(std::string(elem_name(e)) + " n=" + std::to_string(n));
      // Rows of very different scales: the normalization, not the input, sets the output's size.
      std::vector<float> x = uniform(size_t(sources) * n, -1, 1, rng);
      for (int32_t r = 0; r < sources; ++r)
        for (int32_t i = 0; i < n; ++i) x[size_t(r) * n + i] *= std::ldexp(1.0f, 6 * r - 12);
      const std::vector<float> weight = uniform(size_t(n), 0.25f, 2.0f, rng);
      DeviceBuffer<float> d_x(x), d_weight(weight);
      DeviceBuffer<int32_t> d_gather(gather);

      for (bool gathered : {false, true}) {
        const auto rows = gathered ? static_cast<int32_t>(gather.size()) : sources;
        DeviceBuffer<uint16_t> out(size_t(rows) * n);
        rmsnorm_rows(e, d_x.get(), d_weight.get(), gathered ? d_gather.get() : nullptr, rows, n, eps, out.get(),
                     nullptr);
        std::vector<float> want(size_t(rows) * n);
        for (int32_t r = 0; r < rows; ++r) {
          const int32_t src = gathered ? gather[r] : r;
          cpu::rmsnorm(x.data() + size_t(src) * n, weight.data(), n, eps, want.data() + size_t(r) * n);
        }
        expect_elem_near(e, out.download(), want, gathered ? "gathered" : "plain");
      }
    }
  }
}

// Gemma's norm of a block's output on its way into the residual: CpuBackend::add_residual's
// rmsnorm then sum, in f32 throughout, on rows of very different scales.
TEST(CudaKernels, RmsnormAddNormalizesEachRowIntoTheResidual) {
  ORZO_REQUIRE_GPU();
  std::mt19937 rng(7);
  const float eps = 1e-6f;
  const int32_t rows = 5;
  for (int32_t n : {32, 640, 4097}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> y = uniform(size_t(rows) * n, -1, 1, rng);
    for (int32_t r = 0; r < rows; ++r)
      for (int32_t i = 0; i < n; ++i) y[size_t(r) * n + i] *= std::ldexp(1.0f, 6 * r - 12);
    const std::vector<float> weight = uniform(size_t(n), 0.25f, 2.0f, rng), x = uniform(size_t(rows) * n, -4, 4, rng);
    DeviceBuffer<float> d_y(y), d_weight(weight), d_x(x);
    rmsnorm_add_rows(d_y.get(), d_weight.get(), rows, n, eps, d_x.get(), nullptr);

    std::vector<float> want(x.size());
    for (int32_t r = 0; r < rows; ++r) cpu::rmsnorm(y.data() + size_t(r) * n, weight.data(), n, eps, want.data() + size_t(r) * n);
    for (size_t i = 0; i < want.size(); ++i) want[i] += x[i];
    expect_f32_near(d_x.download(), want, 2e-5, 2e-5, "x");
    EXPECT_EQ(d_y.download(), y) << "the block's output is left as it was";
  }
}

TEST(CudaKernels, BiasIsAddedToEveryRow) {
  ORZO_REQUIRE_GPU();
  std::mt19937 rng(3);
  // The last shape has more elements than one grid pass covers.
  const std::pair<int32_t, int32_t> shapes[] = {{1, 7}, {5, 4099}, {4097, 4099}};
  for (const auto& [rows, n] : shapes) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(n));
    const std::vector<float> x = uniform(size_t(rows) * n, -4, 4, rng), bias = uniform(size_t(n), -1, 1, rng);
    DeviceBuffer<float> d_x(x), d_bias(bias);
    add_bias_rows(d_x.get(), d_bias.get(), rows, n, nullptr);
    const std::vector<float> got = d_x.download();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], x[i] + bias[i % size_t(n)]) << "element " << i;
  }
}

// `twin` is the CPU's activation of one row, in place over the gate; `extremes` are gates
// where its exponential overflows or vanishes in f32, planted in every row.
template <typename Twin>
void check_gated(GateActivation act, const Twin& twin, const std::vector<float>& extremes, std::mt19937& rng) {
  const int32_t rows = 3, inter = 1001;
  std::vector<float> gate_up = uniform(size_t(rows) * 2 * inter, -8, 8, rng);
  for (int32_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < extremes.size(); ++j) gate_up[size_t(r) * 2 * inter + 97 * j + size_t(r)] = extremes[j];
  DeviceBuffer<float> d_gate_up(gate_up);
  std::vector<float> want(size_t(rows) * inter), scratch(static_cast<size_t>(inter));
  for (int32_t r = 0; r < rows; ++r) {
    const float* g = gate_up.data() + size_t(r) * 2 * inter;
    std::copy(g, g + inter, want.data() + size_t(r) * inter);
    twin(want.data() + size_t(r) * inter, g + inter, inter, scratch.data());
  }
  for (Elem e : kElems) {
    SCOPED_TRACE(elem_name(e));
    DeviceBuffer<uint16_t> out(size_t(rows) * inter);
    swiglu_rows(e, act, d_gate_up.get(), rows, inter, out.get(), nullptr);
    expect_elem_near(e, out.download(), want, "gated activation");
  }
}

TEST(CudaKernels, SwigluMatchesCpuIncludingLargeGates) {
  ORZO_REQUIRE_GPU();
  std::mt19937 rng(4);
  // e^-g overflows below about -88.
  check_gated(GateActivation::silu, cpu::swiglu, {100.0f, -100.0f, 88.0f, -88.0f, -87.5f, 30.0f, -30.0f, 0.0f}, rng);
}

// GeGLU (Gemma): its exponent -2 sqrt(2/pi) (g + 0.044715 g^3) reaches the cap of 87 near
// g = -10.5, and grows as g^3 past it.
TEST(CudaKernels, SwigluGeluTanhMatchesCpuGegluIncludingLargeGates) {
  ORZO_REQUIRE_GPU();
  std::mt19937 rng(8);
  check_gated(GateActivation::gelu_tanh, cpu::geglu_tanh,
              {100.0f, -100.0f, 10.5f, -10.5f, -10.4f, -10.6f, 3.0f, -3.0f, 0.0f, -1e20f}, rng);
}

// Gemma 2's final soft cap over logit rows, against the CPU LM head's division then
// scaled_tanh_inplace. That tanh is within ~1e-7 of the true one, times the cap; logits far past
// the cap land on it exactly. The largest shape needs more than one grid pass.
TEST(CudaKernels, SoftcapBoundsLogitsAsTheCpuLmHead) {
  ORZO_REQUIRE_GPU();
  std::mt19937 rng(9);
  const std::tuple<float, int32_t, int32_t> cases[] = {{8.0f, 1, 7}, {8.0f, 3, 4099}, {30.0f, 4097, 4099}};  // cap, shape
  for (const auto& [cap, rows, n] : cases) {
    SCOPED_TRACE("cap " + std::to_string(cap) + ", " + std::to_string(rows) + "x" + std::to_string(n));
    std::vector<float> x = uniform(size_t(rows) * n, -4 * cap, 4 * cap, rng);
    const float extremes[] = {0.0f, -0.0f, 1e-30f, 1e30f, -1e30f, cap, -cap};
    for (size_t j = 0; j < std::size(extremes) && j < x.size(); ++j) x[j] = extremes[j];
    DeviceBuffer<float> d_x(x);
    softcap_rows(d_x.get(), rows, n, cap, nullptr);
    std::vector<float> want = x;
    for (float& v : want) v /= cap;
    cpu::scaled_tanh_inplace(want.data(), static_cast<int64_t>(want.size()), cap);
    expect_f32_near(d_x.download(), want, 2e-6, 1e-6 * cap, "logits");
  }
}

struct RopeCase {
  int32_t num_heads, num_kv_heads, head_dim;
  bool interleaved, bias, qk_norm;
  bool rotates = true;  // false: a layer without RoPE (SmolLM3)
  int32_t rotary_dim = 0;  // > 0: Phi-3's LongRope on that many dims of each head (else Llama 3.1's, on all)
  int32_t rotary() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  std::string name() const {
    return std::to_string(num_heads) + "/" + std::to_string(num_kv_heads) + " heads, dim " + std::to_string(head_dim) +
           (interleaved ? ", interleaved" : ", half split") + (bias ? ", bias" : "") + (qk_norm ? ", q/k norm" : "") +
           (rotates ? "" : ", no RoPE") + (rotary_dim > 0 ? ", LongRope on " + std::to_string(rotary_dim) + " dims" : "");
  }
};

// Llama 3.1's long-context frequencies, so that positions past the original 8192 matter.
std::vector<float> llama3_inv_freq(int32_t head_dim) {
  ModelConfig c;
  c.head_dim = head_dim;
  c.rope_theta = 500000.0;
  c.rope_scaling.type = RopeScaling::Type::Llama3;
  c.rope_scaling.factor = 8.0;
  c.rope_scaling.low_freq_factor = 1.0;
  c.rope_scaling.high_freq_factor = 4.0;
  c.rope_scaling.original_max_position = 8192;
  return rope_inv_freq(c);
}

// Phi-3.5's long factors (from an original 4096) and attention factor, on `rotary_dim` dims.
ModelConfig phi3_rope(int32_t head_dim, int32_t rotary_dim) {
  ModelConfig c;
  c.head_dim = head_dim;
  c.rotary_dim = rotary_dim;
  auto& s = c.rope_scaling;
  s.type = RopeScaling::Type::LongRope;
  s.original_max_position = 4096;
  s.factor = 32.0;
  s.attention_factor = longrope_attention_factor(s.factor, s.original_max_position);
  for (int32_t i = 0; i < rotary_dim / 2; ++i) {
    s.short_factor.push_back(1.0 + 0.05 * i);
    s.long_factor.push_back(1.0 + 1.5 * i);
  }
  return c;
}

// What CpuBackend::attention_block does to one row's q and k after its matmul has added the
// bias: reorder, per-head norm, rotation (where the layer rotates), in place.
void cpu_row(const RopeCase& c, const std::vector<float>& inv_freq, float scale, const std::vector<float>& norm_q,
             const std::vector<float>& norm_k, double eps, int32_t position, float* q, float* k) {
  const int64_t hd = c.head_dim;
  std::vector<float> scratch(static_cast<size_t>(hd)), cos_sin(static_cast<size_t>(hd));
  if (c.interleaved) {
    cpu::deinterleave_heads(q, c.num_heads, hd, scratch.data());
    cpu::deinterleave_heads(k, c.num_kv_heads, hd, scratch.data());
  }
  if (c.qk_norm) {
    for (int64_t h = 0; h < c.num_heads; ++h) cpu::rmsnorm(q + h * hd, norm_q.data(), hd, eps, q + h * hd);
    for (int64_t h = 0; h < c.num_kv_heads; ++h) cpu::rmsnorm(k + h * hd, norm_k.data(), hd, eps, k + h * hd);
  }
  if (!c.rotates) return;
  cpu::rope_angles(inv_freq.data(), c.rotary() / 2, position, cos_sin.data(), scale);
  cpu::apply_rope(q, c.num_heads, hd, cos_sin.data(), c.rotary());
  cpu::apply_rope(k, c.num_kv_heads, hd, cos_sin.data(), c.rotary());
}

void check_rope_case(const RopeCase& c, Elem e, std::mt19937& rng) {
  SCOPED_TRACE(c.name() + ", " + elem_name(e));
  const std::vector<int32_t> positions = {0, 1, 17, 4095, 8195, 100000, 131072};
  // Blocks of 16 slots out of order with holes, and a row that writes nothing.
  const std::vector<int32_t> slots = {5 * 16 + 3, 1, -1, 2 * 16 + 15, 3 * 16, 5 * 16 + 4, 16 + 7};
  const int32_t rows = static_cast<int32_t>(positions.size()), cache_slots = 6 * 16;
  const int32_t hd = c.head_dim, q_dim = c.num_heads * hd, kv_dim = c.num_kv_heads * hd;
  const int32_t width = q_dim + 2 * kv_dim;
  const float eps = 1e-6f;
  const uint16_t sentinel = 0x7fc1;  // a NaN in both storage types

  const std::vector<float> qkv = uniform(size_t(rows) * width, -2, 2, rng);
  const std::vector<float> bias = uniform(size_t(width), -1, 1, rng);
  const std::vector<float> norm_q = uniform(size_t(hd), 0.5f, 1.5f, rng), norm_k = uniform(size_t(hd), 0.5f, 1.5f, rng);
  const ModelConfig longrope = phi3_rope(hd, c.rotary());
  const std::vector<float> inv_freq = c.rotary_dim > 0 ? rope_inv_freq(longrope, false, true) : llama3_inv_freq(hd);
  const float scale = c.rotary_dim > 0 ? static_cast<float>(longrope.rope_scaling.attention_factor) : 1.0f;

  DeviceBuffer<float> d_qkv(qkv), d_bias(bias), d_norm_q(norm_q), d_norm_k(norm_k), d_inv_freq(inv_freq);
  DeviceBuffer<int32_t> d_positions(positions), d_slots(slots);
  DeviceBuffer<float> q_out(std::vector<float>(size_t(rows) * q_dim, std::nanf("")));
  const std::vector<uint16_t> untouched(size_t(cache_slots) * kv_dim, sentinel);
  DeviceBuffer<uint16_t> k_cache(untouched), v_cache(untouched);

  QkvRopeArgs a;
  a.elem = e;
  a.qkv = d_qkv.get();
  a.bias = c.bias ? d_bias.get() : nullptr;
  a.q_norm = c.qk_norm ? d_norm_q.get() : nullptr;
  a.k_norm = c.qk_norm ? d_norm_k.get() : nullptr;
  a.eps = eps;
  a.interleaved = c.interleaved;
  a.inv_freq = c.rotates ? d_inv_freq.get() : nullptr;
  a.positions = d_positions.get();
  a.slot_mapping = d_slots.get();
  a.rows = rows;
  a.num_heads = c.num_heads;
  a.num_kv_heads = c.num_kv_heads;
  a.head_dim = hd;
  a.rotary_dim = c.rotary_dim;
  a.rope_scale = scale;
  a.q_out = q_out.get();
  a.k_cache = k_cache.get();
  a.v_cache = v_cache.get();
  qkv_rope_to_cache(a, nullptr);

  std::vector<float> want_q(size_t(rows) * q_dim);
  std::vector<float> want_k(untouched.size()), want_v(untouched.size());
  std::vector<bool> written(size_t(cache_slots), false);
  for (int32_t r = 0; r < rows; ++r) {
    std::vector<float> row(qkv.begin() + size_t(r) * width, qkv.begin() + size_t(r + 1) * width);
    if (c.bias)
      for (int32_t i = 0; i < width; ++i) row[size_t(i)] += bias[size_t(i)];
    cpu_row(c, inv_freq, scale, norm_q, norm_k, eps, positions[size_t(r)], row.data(), row.data() + q_dim);
    std::copy(row.begin(), row.begin() + q_dim, want_q.begin() + size_t(r) * q_dim);
    if (slots[size_t(r)] < 0) continue;
    const size_t at = size_t(slots[size_t(r)]) * kv_dim;
    std::copy(row.begin() + q_dim, row.begin() + q_dim + kv_dim, want_k.begin() + long(at));
    std::copy(row.begin() + q_dim + kv_dim, row.end(), want_v.begin() + long(at));
    written[size_t(slots[size_t(r)])] = true;
  }

  expect_f32_near(q_out.download(), want_q, 2e-5, 2e-5, "q_out");
  for (const auto& [name, buffer, want] :
       {std::tuple{"k_cache", &k_cache, &want_k}, std::tuple{"v_cache", &v_cache, &want_v}}) {
    const std::vector<uint16_t> got = buffer->download();
    std::vector<uint16_t> got_written;
    std::vector<float> want_written;
    for (int32_t s = 0; s < cache_slots; ++s) {
      const size_t at = size_t(s) * kv_dim;
      if (!written[size_t(s)]) {
        for (int32_t i = 0; i < kv_dim; ++i)
          ASSERT_EQ(got[at + size_t(i)], sentinel) << name << ": unwritten slot " << s << " changed at " << i;
        continue;
      }
      got_written.insert(got_written.end(), got.begin() + long(at), got.begin() + long(at + kv_dim));
      want_written.insert(want_written.end(), want->begin() + long(at), want->begin() + long(at + kv_dim));
    }
    expect_elem_near(e, got_written, want_written, name);
  }
}

TEST(CudaKernels, QkvRopeToCacheMatchesCpuAttentionPrologue) {
  ORZO_REQUIRE_GPU();
  std::mt19937 rng(5);
  const int32_t shapes[][3] = {{4, 2, 8}, {6, 2, 128}, {3, 3, 64}};
  for (const auto& s : shapes)
    for (bool interleaved : {false, true})
      for (bool bias : {false, true})
        for (bool qk_norm : {false, true})
          for (bool rotates : {true, false})
            for (Elem e : kElems) check_rope_case({s[0], s[1], s[2], interleaved, bias, qk_norm, rotates}, e, rng);
}

// Phi-3: LongRope's long factors and attention factor on part of each head (Phi-4-mini: 96 of
// 128), the rest passed through; and on all of it (Phi-3.5).
TEST(CudaKernels, QkvRopeToCacheTurnsPartOfEachHeadWithLongRope) {
  ORZO_REQUIRE_GPU();
  std::mt19937 rng(6);
  const int32_t shapes[][4] = {{4, 2, 16, 12}, {6, 2, 128, 96}, {3, 1, 64, 64}};
  for (const auto& s : shapes)
    for (bool qk_norm : {false, true})
      for (bool rotates : {true, false})
        for (Elem e : kElems) check_rope_case({s[0], s[1], s[2], false, false, qk_norm, rotates, s[3]}, e, rng);
}

TEST(CudaKernels, GemmMatchesDoubleReference) {
  ORZO_REQUIRE_GPU();
  std::mt19937 rng(6);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  {
    DeviceBuffer<uint8_t> workspace(Gemm::kWorkspaceBytes);
    const Gemm gemm(stream, workspace.get(), workspace.bytes());
    const std::pair<int32_t, int32_t> shapes[] = {{96, 80}, {4096, 64}, {45, 333}};  // out, in
    for (Elem e : kElems)
      for (int32_t rows : {1, 3, 64})
        for (const auto& [out, in] : shapes)
          for (bool accumulate : {false, true}) {
            SCOPED_TRACE(std::string(elem_name(e)) + " rows=" + std::to_string(rows) + " out=" + std::to_string(out) +
                         " in=" + std::to_string(in) + (accumulate ? " accumulate" : ""));
            const std::vector<uint16_t> x = to_elem(e, uniform(size_t(rows) * in, -1, 1, rng));
            const std::vector<uint16_t> w = to_elem(e, uniform(size_t(out) * in, -1, 1, rng));
            // Without accumulation y starts as NaN: beta = 0 must not read it.
            const std::vector<float> y0 = accumulate ? uniform(size_t(rows) * out, -10, 10, rng)
                                                     : std::vector<float>(size_t(rows) * out, std::nanf(""));
            DeviceBuffer<uint16_t> d_x(x), d_w(w);
            DeviceBuffer<float> d_y(y0);
            gemm.linear(e, d_x.get(), rows, d_w.get(), out, in, d_y.get(), accumulate);
            check(cudaStreamSynchronize(stream), "gemm");
            const std::vector<float> got = d_y.download();

            const std::vector<float> xf = from_elem(e, x), wf = from_elem(e, w);
            size_t bad = 0;
            for (int32_t r = 0; r < rows; ++r)
              for (int32_t o = 0; o < out; ++o) {
                double sum = accumulate ? y0[size_t(r) * out + o] : 0.0, magnitude = 0;
                for (int32_t i = 0; i < in; ++i) {
                  const double p = double(xf[size_t(r) * in + i]) * wf[size_t(o) * in + i];
                  sum += p;
                  magnitude += std::fabs(p);
                }
                const float g = got[size_t(r) * out + o];
                if (std::fabs(g - sum) <= 1e-4 * magnitude + 1e-5) continue;
                if (bad++ == 0) ADD_FAILURE() << "y[" << r << ", " << o << "]: got " << g << ", want " << sum;
              }
            EXPECT_EQ(bad, 0u);
          }
  }
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

// The shape checks come before any CUDA call, so they hold without a GPU too.
TEST(CudaKernels, BadShapesAreRefusedBeforeAnyLaunch) {
  float f = 0;
  int32_t i = 0;
  EXPECT_THROW(embed_rows(Elem::bf16, &f, &i, -1, 8, 1.0f, &f, nullptr), std::invalid_argument);
  EXPECT_THROW(rmsnorm_rows(Elem::bf16, &f, &f, nullptr, 1, 0, 1e-5f, &f, nullptr), std::invalid_argument);
  EXPECT_THROW(rmsnorm_add_rows(&f, &f, -1, 8, 1e-5f, &f, nullptr), std::invalid_argument);
  EXPECT_THROW(add_bias_rows(&f, &f, 1, -3, nullptr), std::invalid_argument);
  EXPECT_THROW(swiglu_rows(Elem::f16, GateActivation::gelu_tanh, &f, -2, 8, &f, nullptr), std::invalid_argument);
  EXPECT_THROW(softcap_rows(&f, -1, 8, 30.0f, nullptr), std::invalid_argument);
  EXPECT_THROW(softcap_rows(&f, 1, 8, 0.0f, nullptr), std::invalid_argument);
  QkvRopeArgs a;
  a.rows = 1;
  a.num_heads = 2;
  a.num_kv_heads = 1;
  a.head_dim = 7;
  EXPECT_THROW(qkv_rope_to_cache(a, nullptr), std::invalid_argument);
  a.head_dim = 8;  // now only the pointers are missing
  EXPECT_THROW(qkv_rope_to_cache(a, nullptr), std::invalid_argument);
  a.rows = 0;  // nothing to launch: only the rotary dims are checked
  a.rotary_dim = 6;
  EXPECT_NO_THROW(qkv_rope_to_cache(a, nullptr));
  for (int32_t rotary : {-2, 5, 10}) {
    a.rotary_dim = rotary;
    EXPECT_THROW(qkv_rope_to_cache(a, nullptr), std::invalid_argument) << rotary;
  }
}

}  // namespace
}  // namespace orzo::cuda
