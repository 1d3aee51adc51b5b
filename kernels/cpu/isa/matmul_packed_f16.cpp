// F16 weights packed side by side (packed_rows.hpp's PackedF16Tile) against f32
// activations, the product inside out (panel_product.hpp): exact on the stored values, as
// the direct kernel and sgemm are, only summed in another order. AVX2 and AVX-512; the
// portable level reads F16 rows as stored.
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "core/dtype.hpp"
#include "kernels/cpu/isa/entry_points.hpp"
#include "kernels/cpu/isa/simd.hpp"
#include "kernels/cpu/packed_rows.hpp"

#if ORZO_SIMD_AVX2
ORZO_TARGET_BEGIN
#include "kernels/cpu/isa/vec.hpp"
#include "kernels/cpu/isa/panel_product.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {

// A step is one weight of each of a group's 16 rows, converted to f32, against one
// activation broadcast.
struct F16Panel {
  using X = float;
  static constexpr int64_t kStepWeights = 1;
  static constexpr bool kRounds = false;
#if ORZO_SIMD_AVX512
  static Vec load(const uint8_t* at) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at))); }
#else
  static Vec load(const uint8_t* at) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at))); }
#endif
  static Vec broadcast(const X* x) { return vset1(*x); }
  static Vec madd(Vec w, Vec x, Vec acc) { return vfma(w, x, acc); }
};

}  // namespace

RowsJob matmul_packed_f16(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                          const float* bias, int slot) {
  return prepare_panels<F16Panel>(x, m, w, y, pool, bias, slot);
}

}  // namespace orzo::cpu::ORZO_ISA_NS
ORZO_TARGET_END
#endif
