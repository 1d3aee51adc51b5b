// BF16 weights against activations rounded to bf16, on AVX-512 BF16's dot product
// (MatmulOptions::bf16_activations, kernels/cpu/matmul.hpp). Compiled with the AVX-512
// level only; other levels have no such instruction and no such kernel.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dtype.hpp"
#include "core/quant_blocks.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/isa/entry_points.hpp"
#include "kernels/cpu/isa/simd.hpp"

#if ORZO_SIMD_BF16_DOT
ORZO_TARGET_BF16_BEGIN
#include "kernels/cpu/isa/weight_formats.hpp"
#include "kernels/cpu/isa/direct_product.hpp"

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

}  // namespace

RowsJob matmul_bf16(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
                    int slot) {
  return prepare_direct<BF16DotFormat>(x, m, w, y, pool, bias, slot);
}

}  // namespace orzo::cpu::ORZO_ISA_NS
ORZO_TARGET_BF16_END
#endif
