// BF16 weights against activations rounded to bf16, on AVX-512 BF16's dot product
// (MatmulOptions::bf16_activations, kernels/cpu/matmul.hpp): the rows as stored, or packed
// where the backend packed them. Compiled with the AVX-512 level only; other levels have
// no such instruction and no such kernel.
#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dtype.hpp"
#include "core/quant_blocks.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/packed_rows.hpp"
#include "kernels/cpu/isa/entry_points.hpp"
#include "kernels/cpu/isa/simd.hpp"

#if ORZO_SIMD_BF16_DOT
ORZO_TARGET_BF16_BEGIN
#include "kernels/cpu/isa/weight_formats.hpp"
#include "kernels/cpu/isa/direct_product.hpp"
#include "kernels/cpu/isa/panel_product.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {

// Activations rounded to bf16 (round to nearest even), 32 to a register: vdpbf16ps adds
// the products of each f32 lane's two bf16 pairs to it, so a 512-bit step does twice the
// multiply-adds of an f32 FMA.
struct Bf16Activations {
  using T = uint16_t;
  static constexpr int64_t kPerVec = 2 * kLanes;
  static T from_f32(float f) { return f32_to_bf16(f); }
  static float to_f32(T v) { return bf16_to_f32(v); }
  static Vec load(const T* p) { return _mm512_castsi512_ps(_mm512_loadu_si512(p)); }
  static Vec madd(Vec w, Vec x, Vec acc) { return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w); }
};

// BF16 rows as they are stored, 32 weights a step, against Bf16Activations.
struct BF16DotFormat {
  using X = Bf16Activations;
  static constexpr int64_t kStep = 2 * kLanes, kStepBytes = 2 * kStep;
  static constexpr int kSubs = 1, kVecs = 1;
  static constexpr bool kBlocked = false;
  static void load(const uint8_t* p, int, Vec* out) { out[0] = _mm512_castsi512_ps(_mm512_loadu_si512(p)); }
  static float element(const uint8_t* row, int64_t c) { return bf16_to_f32(load_u16(row + 2 * c)); }
};

// Packed rows (panel_product.hpp): a step is a pair of a row's weights, which vdpbf16ps
// meets with the same pair of an activation row broadcast to every lane.
struct Bf16Panel {
  using X = uint16_t;
  static constexpr int64_t kStepWeights = 2;
  static constexpr bool kRounds = true;
  static Vec load(const uint8_t* at) { return _mm512_castsi512_ps(_mm512_loadu_si512(at)); }
  static Vec broadcast(const X* x) {
    uint32_t pair;
    std::memcpy(&pair, x, sizeof pair);
    return _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(pair)));
  }
  static Vec madd(Vec w, Vec x, Vec acc) { return Bf16Activations::madd(w, x, acc); }
  static void round_row(const float* x, int64_t k, X* out) {
    f32_row_to_half(DType::BF16, x, k, reinterpret_cast<uint8_t*>(out));
  }
};

}  // namespace

RowsJob matmul_bf16(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
                    int slot) {
  if (w.packed) return prepare_panels<Bf16Panel>(x, m, w, y, pool, bias, slot);
  return prepare_direct<BF16DotFormat>(x, m, w, y, pool, bias, slot);
}

}  // namespace orzo::cpu::ORZO_ISA_NS
ORZO_TARGET_BF16_END
#endif
