#pragma once
// y = x · Wᵀ for a Linear layer whose weight W ([n, k], any DType) stays in its stored
// type: activations are f32 and accumulation is f32.
#include <cstdint>
#include <initializer_list>

#include "core/tensor.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/matmul_options.hpp"

namespace orzo::cpu {

// From this many rows two digits run on strips (matmul_q16), whose decode and transpose
// of 16 weight rows pays for itself once several activation rows share it; fewer take
// matmul_q16_gemv, the weights as stored. On an Emerald Rapids (matmul_bench q8/) the gemv
// ran Q4_K 1.2-1.5x the strips' speed at one row and level at two, Q6_K 1.3-1.7x at both,
// and the strips led Q4_K by 1.15x at three.
constexpr int64_t kStripsFromRows = 3;
static_assert(kStripsFromRows <= kGemvMaxRows + 1, "matmul_q16_gemv takes every m below it");

// The rules matmul() routes by, for whoever reports which arithmetic runs (orzo bench, the
// server's log). From how many rows block-type products take one int8 digit under
// `options` on the selected level: 1 under int8_activations, the level's
// one_digit_from_rows under int8 batches, 0 never.
int64_t one_digit_from_rows(MatmulOptions options);
// From how many rows weights of type t run on AMX tiles under `options`; 0 never.
int64_t tiles_from_rows(MatmulOptions options, DType t);

// Whether the products of w under `options` read it packed (packed_rows.hpp), so that a
// backend packs it: where the level reads its type packed, and for BF16 weights only
// under bf16_activations, the arithmetic of the one kernel that reads them.
bool reads_packed_rows(const TensorView& w, MatmulOptions options);

// x: [m, k] row-major f32, y: [m, n] row-major f32; bias (may be null): [n] f32.
void matmul(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
            const float* bias = nullptr, MatmulOptions options = {});

// One of several products of the same x (matmuls).
struct MatmulTarget {
  const TensorView& w;
  float* y;
  const float* bias = nullptr;
};

// matmul() of x by each target's weight, the same bits. A decode step's products (fewer
// than kStripsFromRows rows) share one parallel region, their columns shared out by the
// bytes of weight they read: a layer's q, k and v, or its gate and up, cost one fork and
// join instead of three or two, where a small model's k and v take less time than the
// threads' wait at the join.
void matmuls(const float* x, int64_t m, std::initializer_list<MatmulTarget> targets, ThreadPool& pool,
             MatmulOptions options = {});

}  // namespace orzo::cpu
