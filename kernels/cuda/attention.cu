// Paged attention on the GPU: decode (split-K, then a merge) and prefill (tiles of rows),
// both built on one block-level routine, attend(), that runs a set of queries sharing a KV
// head over a range of positions.
//
// How a block works. Its queries (scaled, in base 2) and their f32 output accumulators sit in
// shared memory; the positions are walked kChunk at a time, each chunk's K and V loaded once
// from the cache, widened to f32, into shared memory, where every query of the block reads
// them. For the scores a warp takes one query and its lanes take one key each: a lane's dot
// product runs over the whole head in shared memory (K rows padded to an odd stride so the 32
// lanes hit 32 banks), and the chunk's max and sum for the online softmax are one warp
// reduction each. For P·V the same warp's lanes take columns of the head instead, and each
// key's weight is broadcast from its lane by a shuffle. Lanes over keys suits every head_dim
// alike (8 as well as 256), where lanes over head_dim would idle most of a warp at 8 and pay a
// warp reduction per key.
//
// When the queries do not fit in shared memory at once, the block takes them in passes, each
// over all of its positions.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/elem_ops.cuh"

namespace orzo::cuda {

namespace {

constexpr int kWarp = 32;
constexpr int kChunk = kWarp;  // keys per chunk: one per lane in the scores
constexpr int kMaxHeadDim = 256;
constexpr int kMaxColumns = kMaxHeadDim / kWarp;  // head columns per lane in P·V
constexpr int kDecodeThreads = 128;
constexpr int kPrefillThreads = 256;  // a prefill block has up to 16 rows' queries to spread over its warps
constexpr int kMergeThreads = 128;
constexpr int kDefaultSharedBytes = 48 * 1024;  // more needs cudaFuncAttributeMaxDynamicSharedMemorySize
constexpr float kLog2e = 1.4426950408889634f;

// A block's shared memory, in 4-byte words: per query of a pass its scaled query and output
// accumulators (head_dim each), running max and sum, and the positions it sees; then one chunk
// of K and V, the chunk's cache slots, and the pass's range of positions.
struct SharedLayout {
  int32_t queries, hd;

  // K rows padded to an odd stride: lane k reading column d of row k hits bank (k * stride + d) % 32.
  __host__ __device__ int64_t k_stride() const { return hd + 1; }
  __host__ __device__ int64_t words() const {
    return int64_t{queries} * (2 * hd + 4) + kChunk * (k_stride() + hd + 1) + 2;
  }
  __host__ int64_t bytes() const { return words() * 4; }
};
static_assert(sizeof(float) == 4 && sizeof(int32_t) == 4, "shared memory is laid out in 4-byte words");

struct SharedView {
  float *q, *o, *m, *l;  // [queries][hd], [queries][hd], [queries], [queries]
  int32_t *first, *last;  // [queries]
  float *k, *v;           // [kChunk][k_stride], [kChunk][hd]
  int32_t *slot, *range;  // [kChunk], [2]
  int32_t hd;
  int64_t k_stride;
};

__device__ SharedView carve(float* smem, const SharedLayout& lay) {
  const int64_t queries = lay.queries, hd = lay.hd;
  SharedView s;
  s.q = smem;
  s.o = s.q + queries * hd;
  s.m = s.o + queries * hd;
  s.l = s.m + queries;
  s.first = reinterpret_cast<int32_t*>(s.l + queries);
  s.last = s.first + queries;
  s.k = reinterpret_cast<float*>(s.last + queries);
  s.v = s.k + kChunk * lay.k_stride();
  s.slot = reinterpret_cast<int32_t*>(s.v + kChunk * hd);
  s.range = s.slot + kChunk;
  s.hd = lay.hd;
  s.k_stride = lay.k_stride();
  return s;
}

// The queries of one block: `count` of them, query j being head kv_head * group + j % group of
// row first_row + j / group. Decode: one row's group; prefill: a tile's rows, row by row.
struct QuerySet {
  int32_t first_row, count, kv_head;
  const int32_t* table;  // the rows' block table
  int32_t clip_lo, clip_hi;  // positions outside are left to other blocks (decode splits)
};

// Where a pass's results go: `o == nullptr` normalizes them into args.out (rounded to T);
// otherwise a decode split's unnormalized state, [rows, num_heads, splits] m and l and
// [rows, num_heads, splits, head_dim] o, merged later.
struct Partials {
  float* m = nullptr;
  float* l = nullptr;
  float* o = nullptr;
  int32_t split = 0, splits = 1;
};

// The positions [first, last] a row at `pos` sees; empty (last < first) for a padding row.
__device__ int2 visible_range(int32_t pos, int32_t sliding_window) {
  if (pos < 0) return make_int2(0, -1);
  return make_int2(sliding_window > 0 ? max(0, pos - sliding_window + 1) : 0, pos);
}

__device__ __forceinline__ float2 load_pair(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
__device__ __forceinline__ float2 load_pair(const __half* p) {
  return __half22float2(*reinterpret_cast<const __half2*>(p));
}

// One chunk's K and V, positions [c0, c0 + kChunk) clipped to hi, into shared memory; slots past
// hi are zeros, so that a weight of 0 never meets a NaN from an unused cache slot.
template <typename T>
__device__ void load_chunk(const PagedAttentionArgs& a, const QuerySet& qs, int32_t c0, int32_t hi,
                           const SharedView& sh) {
  if (threadIdx.x < kChunk) {
    const int32_t p = c0 + static_cast<int32_t>(threadIdx.x);
    sh.slot[threadIdx.x] = p <= hi ? qs.table[p / a.block_size] * a.block_size + p % a.block_size : -1;
  }
  __syncthreads();
  const int32_t hd = a.head_dim, pairs = hd / 2;
  const int64_t kv_dim = int64_t{a.num_kv_heads} * hd, head_offset = int64_t{qs.kv_head} * hd;
  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  // Pairs: head_dim and kv_dim are even, so a pair never straddles 4-byte alignment.
  for (int32_t i = threadIdx.x; i < kChunk * pairs; i += blockDim.x) {
    const int32_t key = i / pairs, d = 2 * (i % pairs);
    const int32_t slot = sh.slot[key];
    float2 k = make_float2(0.0f, 0.0f), v = k;
    if (slot >= 0) {
      const int64_t at = slot * kv_dim + head_offset + d;
      k = load_pair(kc + at);
      v = load_pair(vc + at);
    }
    sh.k[key * sh.k_stride + d] = k.x;
    sh.k[key * sh.k_stride + d + 1] = k.y;
    sh.v[key * hd + d] = v.x;
    sh.v[key * hd + d + 1] = v.y;
  }
  __syncthreads();
}

// Query `qi` of the pass against the chunk at c0, by one warp: scores, online softmax update,
// and P·V into its accumulators. Its keys beyond hi or outside its own range score -inf. With
// score_cap > 0 a score s (already divided by the soft cap) becomes score_cap * tanh(s).
__device__ void attend_chunk(int32_t qi, int32_t c0, int32_t hi, float score_cap, const SharedView& sh) {
  const int32_t hd = sh.hd, lane = static_cast<int32_t>(threadIdx.x % kWarp);
  const float* q = sh.q + int64_t{qi} * hd;
  const float* k = sh.k + lane * sh.k_stride;
  float s = 0.0f;
  for (int32_t d = 0; d < hd; ++d) s += q[d] * k[d];
  if (score_cap > 0.0f) s = score_cap * tanhf(s);
  const int32_t p = c0 + lane;
  if (p > hi || p < sh.first[qi] || p > sh.last[qi]) s = -INFINITY;

  const float chunk_max = warp_max(s);
  if (chunk_max == -INFINITY) return;  // the same in every lane: the query sees none of the chunk
  const float m_old = sh.m[qi];
  const float m_new = fmaxf(m_old, chunk_max);  // finite from here on
  const float weight = exp2f(s - m_new);        // 0 for a masked key
  const float alpha = exp2f(m_old - m_new);     // rescales what came before; 0 at the first seen chunk
  const float chunk_sum = warp_sum(weight);

  float* o = sh.o + int64_t{qi} * hd;
  float acc[kMaxColumns];
#pragma unroll
  for (int c = 0; c < kMaxColumns; ++c) {
    const int32_t d = lane + c * kWarp;
    acc[c] = d < hd ? o[d] * alpha : 0.0f;
  }
  for (int32_t key = 0; key < kChunk; ++key) {
    const float w = __shfl_sync(0xffffffffu, weight, key);
#pragma unroll
    for (int c = 0; c < kMaxColumns; ++c) {
      const int32_t d = lane + c * kWarp;
      if (d < hd) acc[c] += w * sh.v[key * hd + d];
    }
  }
#pragma unroll
  for (int c = 0; c < kMaxColumns; ++c) {
    const int32_t d = lane + c * kWarp;
    if (d < hd) o[d] = acc[c];
  }
  __syncwarp();  // every lane has read m[qi] before lane 0 replaces it
  if (lane == 0) {
    sh.l[qi] = sh.l[qi] * alpha + chunk_sum;
    sh.m[qi] = m_new;
  }
}

// The whole block: the query set in passes of at most pass_queries, each pass over the
// union of its queries' ranges within [clip_lo, clip_hi]. All threads call it.
template <typename T>
__device__ void attend(const PagedAttentionArgs& a, const QuerySet& qs, int32_t pass_queries, const Partials& partials) {
  extern __shared__ float smem[];
  const SharedView sh = carve(smem, SharedLayout{pass_queries, a.head_dim});
  const int32_t hd = a.head_dim, group = a.num_heads / a.num_kv_heads;
  const int64_t row_stride = int64_t{a.num_heads} * hd;
  // exp(x * scale) = 2^(x * scale * log2 e). A capped score is cap * tanh(x * scale / cap), so
  // the query takes scale / cap and log2 e comes after the tanh.
  const float q_scale = a.softcap > 0.0f ? a.scale / a.softcap : a.scale * kLog2e;
  const float score_cap = a.softcap > 0.0f ? a.softcap * kLog2e : 0.0f;
  const int32_t warp = static_cast<int32_t>(threadIdx.x / kWarp), warps = static_cast<int32_t>(blockDim.x / kWarp);
  const auto row_of = [&](int32_t j) { return qs.first_row + j / group; };
  const auto head_of = [&](int32_t j) { return qs.kv_head * group + j % group; };

  for (int32_t pass = 0; pass < qs.count; pass += pass_queries) {
    const int32_t n = min(pass_queries, qs.count - pass);
    for (int32_t i = threadIdx.x; i < n * hd; i += blockDim.x) {
      const int32_t j = pass + i / hd, d = i % hd;
      sh.q[i] = a.q[row_of(j) * row_stride + head_of(j) * hd + d] * q_scale;
      sh.o[i] = 0.0f;
    }
    for (int32_t i = threadIdx.x; i < n; i += blockDim.x) {
      const int2 seen = visible_range(a.positions[row_of(pass + i)], a.sliding_window);
      sh.first[i] = seen.x;
      sh.last[i] = seen.y;
      sh.m[i] = -INFINITY;
      sh.l[i] = 0.0f;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int32_t lo = INT32_MAX, hi = INT32_MIN;
      for (int32_t i = 0; i < n; ++i) {
        if (sh.last[i] < sh.first[i]) continue;
        lo = min(lo, sh.first[i]);
        hi = max(hi, sh.last[i]);
      }
      sh.range[0] = max(lo, qs.clip_lo);
      sh.range[1] = min(hi, qs.clip_hi);
    }
    __syncthreads();
    const int32_t lo = sh.range[0], hi = sh.range[1];

    for (int32_t c0 = lo; c0 <= hi; c0 += kChunk) {
      load_chunk<T>(a, qs, c0, hi, sh);
      for (int32_t qi = warp; qi < n; qi += warps) attend_chunk(qi, c0, hi, score_cap, sh);
      __syncthreads();  // before the next chunk overwrites K/V
    }

    for (int32_t i = threadIdx.x; i < n * hd; i += blockDim.x) {
      const int32_t qi = i / hd, j = pass + qi, d = i % hd;
      const float o = sh.o[i], l = sh.l[qi];
      if (partials.o == nullptr) {
        // l == 0: the row saw nothing (a padding row).
        static_cast<T*>(a.out)[row_of(j) * row_stride + head_of(j) * hd + d] = from_f32<T>(l > 0.0f ? o / l : 0.0f);
      } else {
        const int64_t at = (int64_t{row_of(j)} * a.num_heads + head_of(j)) * partials.splits + partials.split;
        partials.o[at * hd + d] = o;
        if (d == 0) {
          partials.m[at] = sh.m[qi];
          partials.l[at] = l;
        }
      }
    }
    __syncthreads();  // before the next pass overwrites the queries
  }
}

// Grid (rows, num_kv_heads, splits). Split s of a row takes a contiguous, chunk-aligned share
// of the positions the row sees, computed here from its position so that the grid does not
// depend on it; a share past the end is empty and leaves a neutral state (m = -inf, l = 0).
template <typename T>
__global__ void decode_kernel(const PagedAttentionArgs a, int32_t pass_queries, const Partials partials) {
  const auto row = static_cast<int32_t>(blockIdx.x);
  const int2 seen = visible_range(a.positions[row], a.sliding_window);
  const int32_t per_split_keys = (seen.y - seen.x + 1 + partials.splits - 1) / partials.splits;
  const int32_t share = (per_split_keys + kChunk - 1) / kChunk * kChunk;
  Partials own = partials;
  own.split = static_cast<int32_t>(blockIdx.z);
  const int32_t lo = seen.x + own.split * share;
  const QuerySet qs{row, a.num_heads / a.num_kv_heads, static_cast<int32_t>(blockIdx.y),
                    a.block_tables + int64_t{a.seq_of_row[row]} * a.table_stride, lo, min(seen.y, lo + share - 1)};
  attend<T>(a, qs, pass_queries, own);
}

// Grid (rows, num_heads): out = Σ_s 2^(m_s - M) o_s / Σ_s 2^(m_s - M) l_s, M the largest m_s.
template <typename T>
__global__ void merge_kernel(const PagedAttentionArgs a, Partials partials) {
  const int64_t at = (int64_t{blockIdx.x} * a.num_heads + blockIdx.y) * partials.splits;
  float top = -INFINITY;
  for (int32_t s = 0; s < partials.splits; ++s) top = fmaxf(top, partials.m[at + s]);
  float l = 0.0f;
  if (top != -INFINITY)
    for (int32_t s = 0; s < partials.splits; ++s) l += exp2f(partials.m[at + s] - top) * partials.l[at + s];
  T* out = static_cast<T*>(a.out) + (int64_t{blockIdx.x} * a.num_heads + blockIdx.y) * a.head_dim;
  for (int32_t d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
    float o = 0.0f;
    if (l > 0.0f)
      for (int32_t s = 0; s < partials.splits; ++s)
        o += exp2f(partials.m[at + s] - top) * partials.o[(at + s) * a.head_dim + d];
    out[d] = from_f32<T>(l > 0.0f ? o / l : 0.0f);  // l == 0: a padding row
  }
}

// Grid (n_tiles, num_kv_heads): a tile's rows share a sequence, so its K/V chunks serve them all.
template <typename T>
__global__ void prefill_kernel(const PagedAttentionArgs a, const AttentionTile* tiles, int32_t pass_queries) {
  const AttentionTile tile = tiles[blockIdx.x];
  // A tile outside [0, rows) is cut to what lies inside, and one left empty does nothing.
  const int32_t first = max(tile.first_row, 0), rows = max(0, min(tile.count, a.rows - first));
  const int32_t seq = rows > 0 ? a.seq_of_row[first] : 0;
  const QuerySet qs{first, rows * (a.num_heads / a.num_kv_heads), static_cast<int32_t>(blockIdx.y),
                    a.block_tables + int64_t{seq} * a.table_stride, 0, INT32_MAX};
  attend<T>(a, qs, pass_queries, Partials{});
}

void validate(const PagedAttentionArgs& a, const char* what) {
  const auto fail = [&](const std::string& why) { throw std::invalid_argument(std::string(what) + ": " + why); };
  if (a.rows < 0) fail("rows " + std::to_string(a.rows) + " is negative");
  if (a.num_kv_heads <= 0 || a.num_heads <= 0 || a.num_heads % a.num_kv_heads != 0)
    fail("num_heads " + std::to_string(a.num_heads) + " is not a positive multiple of num_kv_heads " +
         std::to_string(a.num_kv_heads));
  if (a.head_dim <= 0 || a.head_dim % 2 != 0 || a.head_dim > kMaxHeadDim)
    fail("head_dim " + std::to_string(a.head_dim) + " is not even and in [2, " + std::to_string(kMaxHeadDim) + "]");
  if (a.block_size <= 0) fail("block_size " + std::to_string(a.block_size) + " is not positive");
  if (a.table_stride <= 0) fail("table_stride " + std::to_string(a.table_stride) + " is not positive");
  if (a.sliding_window < 0) fail("sliding_window " + std::to_string(a.sliding_window) + " is negative");
  if (!std::isfinite(a.softcap) || a.softcap < 0)
    fail("softcap " + std::to_string(a.softcap) + " is not finite and non-negative");
  if (a.num_heads > 65535) fail("num_heads " + std::to_string(a.num_heads) + " exceeds a grid dimension");
  if (a.rows > 0 && (!a.q || !a.k_cache || !a.v_cache || !a.block_tables || !a.seq_of_row || !a.positions || !a.out))
    fail("a device pointer is null");
}

// How many of a block's `queries` fit in one pass in the device's shared memory, and the
// bytes that takes; opts `kernel` into more than the default 48 KB where needed.
template <typename Kernel>
SharedLayout shared_layout(Kernel* kernel, int32_t queries, int32_t head_dim, const char* what) {
  int device = 0, limit = 0;
  check(cudaGetDevice(&device), what);
  check(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), what);
  const int64_t fixed = SharedLayout{0, head_dim}.bytes();
  const int64_t per_query = SharedLayout{1, head_dim}.bytes() - fixed;
  const auto fit = static_cast<int32_t>(std::min<int64_t>(queries, (limit - fixed) / per_query));
  if (fit < 1)
    throw std::invalid_argument(std::string(what) + ": head_dim " + std::to_string(head_dim) + " needs " +
                                std::to_string(fixed + per_query) + " bytes of shared memory, the device has " +
                                std::to_string(limit));
  const SharedLayout lay{fit, head_dim};
  if (lay.bytes() > kDefaultSharedBytes)
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(lay.bytes())),
          what);
  return lay;
}

}  // namespace

size_t decode_workspace_bytes(int32_t rows, int32_t num_heads, int32_t head_dim, int32_t splits) {
  if (rows < 0 || num_heads < 0 || head_dim < 0 || splits < 0)
    throw std::invalid_argument("decode_workspace_bytes: negative shape (rows " + std::to_string(rows) +
                                ", num_heads " + std::to_string(num_heads) + ", head_dim " +
                                std::to_string(head_dim) + ", splits " + std::to_string(splits) + ")");
  // One split writes the output directly. More keep m and l, then o: Partials' layout.
  if (splits <= 1) return 0;
  return static_cast<size_t>(rows) * static_cast<size_t>(num_heads) * static_cast<size_t>(splits) *
         (static_cast<size_t>(head_dim) + 2) * sizeof(float);
}

void paged_attention_decode(const PagedAttentionArgs& args, int32_t splits, void* workspace, cudaStream_t stream) {
  validate(args, "paged_attention_decode");
  if (splits < 1 || splits > kMaxDecodeSplits)
    throw std::invalid_argument("paged_attention_decode: splits " + std::to_string(splits) + " is not in [1, " +
                                std::to_string(kMaxDecodeSplits) + "]");
  if (splits > 1 && workspace == nullptr)
    throw std::invalid_argument("paged_attention_decode: " + std::to_string(splits) + " splits need a workspace");
  if (args.rows == 0) return;
  dispatch_elem(args.elem, [&](auto zero) {
    using T = decltype(zero);
    Partials partials;
    partials.splits = splits;
    if (splits > 1) {
      const size_t count = static_cast<size_t>(args.rows) * static_cast<size_t>(args.num_heads) * splits;
      partials.m = static_cast<float*>(workspace);
      partials.l = partials.m + count;
      partials.o = partials.l + count;
    }
    const SharedLayout lay =
        shared_layout(decode_kernel<T>, args.num_heads / args.num_kv_heads, args.head_dim, "paged_attention_decode");
    const dim3 grid(static_cast<unsigned>(args.rows), static_cast<unsigned>(args.num_kv_heads),
                    static_cast<unsigned>(splits));
    decode_kernel<T><<<grid, kDecodeThreads, static_cast<size_t>(lay.bytes()), stream>>>(args, lay.queries, partials);
    check_launch("paged_attention_decode");
    if (splits > 1) {
      const dim3 merge_grid(static_cast<unsigned>(args.rows), static_cast<unsigned>(args.num_heads));
      merge_kernel<T><<<merge_grid, kMergeThreads, 0, stream>>>(args, partials);
      check_launch("paged_attention_decode merge");
    }
  });
}

void paged_attention_prefill(const PagedAttentionArgs& args, const AttentionTile* tiles, int32_t n_tiles,
                             cudaStream_t stream) {
  validate(args, "paged_attention_prefill");
  if (n_tiles < 0) throw std::invalid_argument("paged_attention_prefill: n_tiles " + std::to_string(n_tiles) + " is negative");
  if (n_tiles > 0 && tiles == nullptr) throw std::invalid_argument("paged_attention_prefill: tiles is null");
  if (args.rows == 0 || n_tiles == 0) return;
  dispatch_elem(args.elem, [&](auto zero) {
    using T = decltype(zero);
    const SharedLayout lay = shared_layout(prefill_kernel<T>, kPrefillTileRows * (args.num_heads / args.num_kv_heads),
                                           args.head_dim, "paged_attention_prefill");
    const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(args.num_kv_heads));
    prefill_kernel<T><<<grid, kPrefillThreads, static_cast<size_t>(lay.bytes()), stream>>>(args, tiles, lay.queries);
    check_launch("paged_attention_prefill");
  });
}

}  // namespace orzo::cuda
