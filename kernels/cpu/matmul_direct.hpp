#pragma once
// The product without a packed copy of the weight, for decode and for batches whose
// activations fit in cache. Decode is bound by the read of the weight, so each weight row
// is streamed from memory once, decoded from its stored type in registers, and dotted
// with every activation row (up to 8 at a time) while it is in cache.
#include <cstdint>

#include "core/tensor.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/isa.hpp"

namespace orzo::cpu {

// matmul() for any m >= 1, on the active ISA level (kernels/cpu/isa/matmul_direct.cpp);
// the caller has validated the shapes.
inline void matmul_direct(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                          const float* bias) {
  run_rows(pool, kernels().matmul_direct(x, m, w, y, pool, bias, 0));
}

}  // namespace orzo::cpu
