#include "kernels/cpu/isa/entry_points.hpp"

namespace orzo::cpu::ORZO_ISA_NS {

const KernelTable& kernel_table() {
  static const KernelTable table{
      ORZO_SIMD_VNNI ? Isa::Avx512Vnni : ORZO_SIMD_AVX2 ? Isa::Avx2 : Isa::Portable,
      matmul_direct, matmul_q8_supports, matmul_q8, nullptr, kTileLanes, attend_tile, half_row_to_f32, f32_row_to_half,
  };
  return table;
}

#if ORZO_SIMD_BF16_DOT
const KernelTable& kernel_table_bf16() {
  static const KernelTable table = [] {
    KernelTable t = kernel_table();
    t.isa = Isa::Avx512Bf16;
    t.matmul_bf16 = matmul_bf16;
    return t;
  }();
  return table;
}
#endif

}  // namespace orzo::cpu::ORZO_ISA_NS
