#include "kernels/cpu/isa/entry_points.hpp"

namespace orzo::cpu::ORZO_ISA_NS {

const KernelTable& kernel_table() {
  static const KernelTable table{
      ORZO_SIMD_VNNI ? Isa::Avx512Vnni : ORZO_SIMD_AVX2 ? Isa::Avx2 : Isa::Portable,
      matmul_direct, matmul_q8_supports, matmul_q8, kTileLanes, attend_tile, half_row_to_f32, f32_row_to_half,
  };
  return table;
}

}  // namespace orzo::cpu::ORZO_ISA_NS
