#include "kernels/cuda/rope_cache.hpp"

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>

#include "kernels/cuda/block_sum.cuh"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/elem_ops.cuh"

namespace orzo::cuda {
namespace {

constexpr int32_t kMaxThreads = 256;
// The head lives in shared memory beside the 32 partial sums; this keeps it well inside 48 KiB.
constexpr int32_t kMaxHeadDim = 8192;

// One block per (row, head) of the fused projection, heads in its order: num_heads q heads,
// then num_kv_heads k heads, then num_kv_heads v heads. A q or k head is gathered into
// shared memory (bias added, interleaved pairs reordered to the half split), normalized when
// asked, and rotated (unless the layer has no RoPE); RoPE pairs i with i + rotary_dim/2, so a
// thread writes both of its pair, and the dims past rotary_dim pass through as they are.
template <typename T>
__global__ void qkv_rope_kernel(QkvRopeArgs a) {
  extern __shared__ float smem[];
  const int32_t hd = a.head_dim, half = hd / 2;
  float* head = smem;
  float* partials = smem + hd;

  const int32_t heads = a.num_heads + 2 * a.num_kv_heads;
  const int64_t row = blockIdx.x / heads;
  const int32_t h = static_cast<int32_t>(blockIdx.x % heads);
  const float* src = a.qkv + row * heads * hd + static_cast<int64_t>(h) * hd;
  const float* bias = a.bias ? a.bias + static_cast<int64_t>(h) * hd : nullptr;
  const int64_t slot = a.slot_mapping[row];
  const int64_t kv_width = static_cast<int64_t>(a.num_kv_heads) * hd;

  if (h >= a.num_heads + a.num_kv_heads) {  // v: no rotation, straight into the cache
    if (slot < 0) return;
    T* dst = static_cast<T*>(a.v_cache) + slot * kv_width + static_cast<int64_t>(h - a.num_heads - a.num_kv_heads) * hd;
    for (int32_t j = threadIdx.x; j < hd; j += blockDim.x) dst[j] = from_f32<T>(src[j] + (bias ? bias[j] : 0.0f));
    return;
  }

  const bool is_q = h < a.num_heads;
  for (int32_t j = threadIdx.x; j < hd; j += blockDim.x) {
    const int32_t from = !a.interleaved ? j : j < half ? 2 * j : 2 * (j - half) + 1;
    head[j] = src[from] + (bias ? bias[from] : 0.0f);
  }
  __syncthreads();

  const float* norm = is_q ? a.q_norm : a.k_norm;
  if (norm) {
    float sum_sq = 0.0f;
    for (int32_t j = threadIdx.x; j < hd; j += blockDim.x) sum_sq += head[j] * head[j];
    sum_sq = block_sum(sum_sq, partials);
    const float inv_rms = 1.0f / sqrtf(sum_sq / static_cast<float>(hd) + a.eps);
    for (int32_t j = threadIdx.x; j < hd; j += blockDim.x) head[j] = norm[j] * (head[j] * inv_rms);
    __syncthreads();
  }

  if (!is_q && slot < 0) return;
  float* q = is_q ? a.q_out + row * a.num_heads * hd + static_cast<int64_t>(h) * hd : nullptr;
  T* k = is_q ? nullptr : static_cast<T*>(a.k_cache) + slot * kv_width + static_cast<int64_t>(h - a.num_heads) * hd;
  const int32_t rotary = a.rotary_dim > 0 ? a.rotary_dim : hd, pair = rotary / 2;
  for (int32_t j = rotary + threadIdx.x; j < hd; j += blockDim.x) {
    if (is_q)
      q[j] = head[j];
    else
      k[j] = from_f32<T>(head[j]);
  }
  const float position = static_cast<float>(a.positions[row]);
  for (int32_t i = threadIdx.x; i < pair; i += blockDim.x) {
    // __fmul_rn keeps the product from being fused into the reduction inside sincosf: the
    // angle is rounded to f32 first, as transformers computes it. sincosf (not __sincosf) stays
    // accurate at the large angles of long contexts.
    float s = 0.0f, c = 1.0f;  // angle 0 where the layer has no RoPE: the pair stays as it is
    if (a.inv_freq) {
      sincosf(__fmul_rn(position, a.inv_freq[i]), &s, &c);
      s *= a.rope_scale;
      c *= a.rope_scale;
    }
    const float x0 = head[i], x1 = head[i + pair];
    const float r0 = x0 * c - x1 * s, r1 = x1 * c + x0 * s;
    if (is_q) {
      q[i] = r0;
      q[i + pair] = r1;
    } else {
      k[i] = from_f32<T>(r0);
      k[i + pair] = from_f32<T>(r1);
    }
  }
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("qkv_rope_to_cache: " + what);
}

}  // namespace

void qkv_rope_to_cache(const QkvRopeArgs& a, cudaStream_t stream) {
  require(a.rows >= 0, "negative row count " + std::to_string(a.rows));
  require(a.num_heads > 0 && a.num_kv_heads > 0,
          "head counts must be positive (num_heads " + std::to_string(a.num_heads) + ", num_kv_heads " +
              std::to_string(a.num_kv_heads) + ")");
  require(a.head_dim > 0 && a.head_dim % 2 == 0 && a.head_dim <= kMaxHeadDim,
          "head_dim " + std::to_string(a.head_dim) + " must be even and in (0, " + std::to_string(kMaxHeadDim) + "]");
  require(a.rotary_dim >= 0 && a.rotary_dim <= a.head_dim && a.rotary_dim % 2 == 0,
          "rotary_dim " + std::to_string(a.rotary_dim) + " must be even and at most head_dim " + std::to_string(a.head_dim));
  require(!a.interleaved || a.rotary_dim == 0 || a.rotary_dim == a.head_dim,
          "interleaved pairs are reordered over the whole head, so they rotate all of it");
  if (a.rows == 0) return;
  require(a.qkv && a.positions && a.slot_mapping && a.q_out && a.k_cache && a.v_cache,
          "a required pointer (qkv, positions, slot_mapping, q_out, k_cache, v_cache) is null");
  const int64_t heads = a.num_heads + 2 * static_cast<int64_t>(a.num_kv_heads);
  const int64_t blocks = a.rows * heads;
  require(blocks <= INT_MAX, "rows * heads = " + std::to_string(blocks) + " exceeds one launch");

  // Enough threads for one rotation pair each, in whole warps (block_sum needs them).
  const int32_t threads = std::min(kMaxThreads, std::max(32, (a.head_dim / 2 + 31) / 32 * 32));
  const size_t shared = (static_cast<size_t>(a.head_dim) + 32) * sizeof(float);
  dispatch_elem(a.elem, [&](auto zero) {
    using T = decltype(zero);
    qkv_rope_kernel<T><<<static_cast<unsigned>(blocks), threads, shared, stream>>>(a);
  });
  check_launch("qkv_rope_to_cache");
}

}  // namespace orzo::cuda
