#pragma once
// The functions every compilation of this folder defines in its level's namespace, which
// kernel_table.cpp gathers into that level's KernelTable (kernels/cpu/isa.hpp says what
// each does).
#include <cstdint>

#include "core/dtype.hpp"
#include "core/tensor.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/attention_tile.hpp"
#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/isa/target.hpp"

namespace orzo::cpu::ORZO_ISA_NS {

RowsJob matmul_direct(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
                      int slot);
bool matmul_q8_supports(DType t);
void matmul_q8(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias);
#if ORZO_SIMD_AVX2
void matmul_q16(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias);
RowsJob matmul_q16_gemv(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
                        int slot);
#endif
#if ORZO_SIMD_AVX2 && !ORZO_SIMD_VNNI
RowsJob matmul_packed_words(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                            const float* bias, int slot);
#endif
#if ORZO_SIMD_AVX2
RowsJob matmul_packed_f16(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                          const float* bias, int slot);
#endif
#if ORZO_SIMD_BF16_DOT
RowsJob matmul_bf16(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias,
                    int slot);
#endif
#if ORZO_SIMD_AMX
void matmul_tiles(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool, const float* bias);
bool matmul_tiles_decodes(DType t);
#endif
// Attention queries per tile: one vector register's worth of floats (twice AVX2's 8
// would not fit its 16 registers).
constexpr int kTileLanes = ORZO_SIMD_AVX512 ? 16 : 8;
static_assert(kTileLanes <= kMaxTileLanes);
void attend_tile(const TileQuery* queries, int count, const HeadCache& kv, int64_t head_dim, float q_scale,
                 float score_cap);
void half_row_to_f32(DType t, const uint8_t* src, int64_t n, float* dst);
void f32_row_to_half(DType t, const float* src, int64_t n, uint8_t* dst);
void gated_row(GateActivation activation, float* gate, const float* up, int64_t n, float* scratch);
void exp_rows(const float* x, int64_t n, float shift, float divisor, float* out);
float max_row(const float* x, int64_t n);
int64_t first_above(const float* x, int64_t begin, int64_t n, float floor);
void bucket_rows(const float* x, const float* w, int64_t n, const BucketScale& scale, uint16_t* out);
void mask_row(const uint64_t* allowed, float* logits, int64_t n);

const KernelTable& kernel_table();
#if ORZO_SIMD_BF16_DOT
// The same level with the BF16 dot product: the avx512-bf16 level (or a native build's).
const KernelTable& kernel_table_bf16();
#endif
#if ORZO_SIMD_AMX
// The same with AMX tiles for the bf16 products of many rows: the avx512-amx level.
const KernelTable& kernel_table_amx();
#endif

}  // namespace orzo::cpu::ORZO_ISA_NS
