#include "kernels/cpu/isa/entry_points.hpp"

namespace orzo::cpu::ORZO_ISA_NS {
namespace {

// The direct kernel reads all of x again for every chunk of weight rows, so it wins while x
// stays in cache and sgemm's blocking wins after; where, matmul_bench's threshold/* family
// says (docs/BENCHMARKS.md, "Direct or sgemm"). On Zen 4 at the AVX-512 level the direct
// kernel led sgemm by 1.1-1.4x up to 512 rows and 8 MiB of x (even at 8 MiB, 0.65x at
// 16 MiB, 0.8x at 1,024 rows of k = 1024; an x within L2, 1 MiB, never left it behind, at
// any m); at the AVX2 level it led up to 1 MiB and fell to 0.75-0.85x past 256 rows or
// 1.4 MiB (against an sgemm that on that machine still ran OpenBLAS's AVX-512 kernels: on
// an AVX2-only CPU the crossover can only move up). The portable level keeps the old
// 4 MiB, unmeasured against a scalar direct kernel.
// Where the CPU issues two 512-bit FMAs a cycle (core_kind() in isa.hpp) sgemm leads from
// fewer rows. On an Emerald Rapids it led from 128 rows (1.1-1.6x, 1.3-1.7x at 512) and at
// 64 rows of k = 8192, while the direct kernel led at 32 rows and at 64 rows of k <= 2048.
// On a Zen 5 (EPYC, family 0x1A, OpenBLAS on its Cooperlake kernels) sgemm led from 128
// rows (1.1-1.4x at 128 and 256, 1.15-2.3x at 512; level at 128 rows of k = 8192) unless
// x stayed within 512 KiB (2816 x 1024 at 128 rows: direct 1.16x), and the direct kernel
// led at 32 and 64 rows up to 2 MiB (1.1-1.8x).
struct Crossover {
  int64_t l2_bytes, max_rows, max_bytes;
};
Crossover direct_crossover() {
#if ORZO_SIMD_AVX512
  switch (core_kind()) {
    case CoreKind::Intel: return {int64_t{256} << 10, 64, int64_t{1} << 20};
    case CoreKind::Zen5: return {int64_t{512} << 10, 64, int64_t{2} << 20};
    case CoreKind::Other: break;
  }
  return {int64_t{1} << 20, 512, int64_t{8} << 20};
#elif ORZO_SIMD_AVX2
  return {int64_t{1} << 20, 256, int64_t{1} << 20};
#else
  return {int64_t{1} << 20, int64_t{1} << 40, int64_t{4} << 20};
#endif
}

// Two digits on AVX-512 VNNI led the f32 path at every m (Emerald Rapids, 512 rows: Q4_K
// 1.84x, Q8_0 1.66x sgemm's). On AVX2 (Zen 3, 2816 x 1024) they led the direct kernel at 32
// rows (Q4_K 1.6x, Q6_K 2x, Q4_0 1.3x, Q8_0 1.0-1.2x) but sgemm led them at 512 (Q4_K
// 1.07x, Q4_0 1.3x, Q8_0 1.9x), so there sgemm keeps the direct kernel's share.
#if ORZO_SIMD_AVX512
constexpr int64_t kQ16MaxBytes = INT64_MAX;
#else
constexpr int64_t kQ16MaxBytes = int64_t{1} << 20;
#endif

// Without AMX tiles two digits cost twice one digit's integer operations (AVX2's
// vpmaddubsw, AVX-512's vpdpbusd), so a batch of many rows, which they bind, runs at half
// the rate llama.cpp's one digit (per 256 weights) gives it. As int8 batches (matmul.hpp)
// such batches take one digit per 32 (matmul_bench q8/q8 against what ran,
// 2 threads, 2816 x 1024 and 1024 x 2816, Emerald Rapids, medians of 3 interleaved). At the
// avx2 level: Q4_K 1.25-2x its words at 32 rows, 1.5-1.9x at 128, 1.1-1.65x at 512; Q6_K
// 1.5-1.7x two digits at 32 and 1.45x at 128, 1.75-2.1x sgemm at 512; Q8_0 1.5-1.6x two
// digits at 32, 1.15-1.7x at 128, 1.15-1.2x sgemm at 512 (0.9x on one thread). At
// avx512-bf16 against two digits: at 32 rows Q4_K 1.15x, Q6_K 1.9x, Q8_0 1.4x; at 512 1.7x,
// 1.25x, 1.5x. Decode steps of a few sequences are bound by their products too on a
// 2-core Zen 5: from 8 rows one digit led two there (matmul_bench q8/q8 against
// q8/packed and q8/q16, 1.15-1.27x at 8 rows, 1.22-1.37x at 16), and whole decode steps of
// the small shape ran, the same binary at 32 and at this threshold, alternating: at the
// avx512-bf16 level Q4_K_M 1.2-1.25x and Q8_0 1.2x at 8 sequences, 1.2-1.25x and 1.3x at 16;
// at the avx2 level 1.04-1.12x and 1.4x at 8, 1.1-1.15x and 1.46x at 16. Fewer rows take the
// gemv's two digits, or the strips', where bytes bind them.
constexpr int64_t kOneDigitFromRows = 8;

// The word gemvs read packed Q4_K rows on both vector levels; AVX-512 reads packed Q6_K,
// Q4_0 and Q4_1 rows too (int8_avx512.hpp, packed_strip_group), where its gemv on the rows
// as stored was bound by its operations (on a Zen 5, Q6_K at 36-44 GB/s of 55-65).
bool reads_packed_blocks(DType t) {
  return (ORZO_SIMD_AVX2 && t == DType::Q4_K) ||
         (ORZO_SIMD_VNNI && (t == DType::Q6_K || t == DType::Q4_0 || t == DType::Q4_1));
}
// And both vector levels read F16 rows packed (matmul_packed_f16).
bool reads_packed_rows(DType t) { return reads_packed_blocks(t) || (ORZO_SIMD_AVX2 && t == DType::F16); }

}  // namespace

const KernelTable& kernel_table() {
  static const Crossover crossover = direct_crossover();
  static const KernelTable table{
      ORZO_SIMD_VNNI ? Isa::Avx512Vnni : ORZO_SIMD_AVX2 ? Isa::Avx2 : Isa::Portable,
      matmul_direct, crossover.l2_bytes, crossover.max_rows, crossover.max_bytes,
      matmul_q8_supports, matmul_q8,
#if ORZO_SIMD_AVX2
      matmul_q16, matmul_q16_gemv, kQ16MaxBytes,
#else
      nullptr, nullptr, 0,
#endif
      reads_packed_rows,
#if ORZO_SIMD_AVX2 && !ORZO_SIMD_VNNI
      matmul_packed_words,
#else
      nullptr,
#endif
#if ORZO_SIMD_AVX2
      matmul_packed_f16,
#else
      nullptr,
#endif
      ORZO_SIMD_AVX2 ? kOneDigitFromRows : 0,
      nullptr,  // matmul_bf16: kernel_table_bf16's alone
      nullptr, nullptr,  // matmul_tiles: kernel_table_amx's alone
      kTileLanes, attend_tile, half_row_to_f32, f32_row_to_half, gated_row, exp_rows, max_row, first_above, bucket_rows,
      mask_row,
  };
  return table;
}

#if ORZO_SIMD_BF16_DOT
namespace {
// matmul_bf16 reads packed BF16 rows too (isa/panel_product.hpp): on a Zen 5, 1.15-1.75x
// the stored rows' rate from 16 rows (matmul_bench matmul/BF16/).
bool reads_packed_rows_bf16(DType t) { return t == DType::BF16 || reads_packed_rows(t); }
}  // namespace

const KernelTable& kernel_table_bf16() {
  static const KernelTable table = [] {
    KernelTable t = kernel_table();
    t.isa = Isa::Avx512Bf16;
    t.matmul_bf16 = matmul_bf16;
    t.reads_packed_rows = reads_packed_rows_bf16;
    return t;
  }();
  return table;
}
#endif

#if ORZO_SIMD_AMX
// From how many rows the tiles lead vdpbf16ps (matmul_bench matmul/BF16/, an Emerald
// Rapids, 2 threads): 1.3-2.9x at 16 rows; forced below, 0.9-1.0x at 8 and 0.65x at 4,
// where a pass pads the rows to 32 and reads 32 weight rows' streams at once.
constexpr int64_t kBf16TilesFromRows = 16;
// For block types, decoded to bf16 for every pass, against two digits (matmul_bench
// q8/tiles and q8/q16, 2816 x 1024 and 1024 x 2816, 2 threads): at 32 rows Q4_K 1.5-1.65x,
// Q6_K 1.6-1.8x, Q8_0 1.25x; at 16 rows Q4_K and Q6_K 1.0-1.1x, Q8_0 0.75-0.8x; at 512 rows
// 1.9-2.8x. F16 as two terms against the direct kernel: 1.4-1.75x at 32 rows, 2-2.5x at 512.
constexpr int64_t kDecodedTilesFromRows = 32;

namespace {
int64_t amx_tiles_from_rows(DType t) {
  if (t == DType::BF16) return kBf16TilesFromRows;
  return matmul_tiles_decodes(t) ? kDecodedTilesFromRows : 0;
}
}  // namespace

const KernelTable& kernel_table_amx() {
  static const KernelTable table = [] {
    KernelTable t = kernel_table_bf16();
    t.isa = Isa::Avx512Amx;
    t.matmul_tiles = matmul_tiles;
    t.tiles_from_rows = amx_tiles_from_rows;
    t.one_digit_from_rows = 0;  // the tiles take block types' batches: 1.6x one digit's at 512 rows
    // F16 and BF16 rows stay as stored, as the tiles read them: packed rows were measured
    // on no CPU with AMX.
    t.reads_packed_rows = reads_packed_blocks;
    t.matmul_packed_f16 = nullptr;
    return t;
  }();
  return table;
}
#endif

}  // namespace orzo::cpu::ORZO_ISA_NS
