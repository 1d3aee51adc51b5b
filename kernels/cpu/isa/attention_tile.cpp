// One tile of attention (kernels/cpu/attention_tile.hpp says what it computes).
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "core/kv_cache.hpp"
#include "kernels/cpu/isa/entry_points.hpp"

ORZO_TARGET_BEGIN
#include "kernels/cpu/exp2.hpp"
#include "kernels/cpu/tanh.hpp"

namespace orzo::cpu::ORZO_ISA_NS {

namespace {

// Keys per chunk: 16 score vectors fill half the AVX-512 register file (all of AVX2's),
// enough independent FMA chains to hide their latency.
constexpr int kChunk = 16;
constexpr float kMasked = -std::numeric_limits<float>::infinity();

// GCC/Clang vector extensions, not intrinsics: they lower to whatever vector ISA the build
// targets (AVX-512, AVX2, SSE), and they pin the register blocking, which the
// auto-vectorizer turns into gathers when left to plain loops. A struct, because GCC drops
// the attribute from an alias template.
template <int N>
struct VecOf {
  typedef float type __attribute__((vector_size(N * sizeof(float))));
};
template <int N>
using Vec = typename VecOf<N>::type;

// For R lanes r of a tile side by side: o_r[0, W * Vecs) = o_r * alpha[r] + sum_j
// p[j * stride + r] * v_j[0, W * Vecs) over the n keys of a chunk, o_r at o + r * o_stride,
// the columns held in registers while the values are summed into them. Each value vector is
// loaded once for all R lanes, and the R * Vecs sums are as many independent FMA chains; a
// lane's sums are the same operations in the same order whatever R is.
template <int W, int Vecs, int R>
void accumulate_columns(float* o, int64_t o_stride, const float* alpha, const float* p, int stride, const float* v,
                        int64_t ld, int n) {
  Vec<W> acc[R][Vecs];
  for (int r = 0; r < R; ++r) {
    std::memcpy(acc[r], o + r * o_stride, sizeof acc[r]);
    for (Vec<W>& a : acc[r]) a *= alpha[r];
  }
  for (int j = 0; j < n; ++j) {
    const float* vj = v + j * ld;
    for (int c = 0; c < Vecs; ++c) {
      Vec<W> x;
      std::memcpy(&x, vj + c * W, sizeof x);
      for (int r = 0; r < R; ++r) acc[r][c] += p[j * stride + r] * x;
    }
  }
  for (int r = 0; r < R; ++r) std::memcpy(o + r * o_stride, acc[r], sizeof acc[r]);
}

// accumulate_columns over a whole head (o_stride = hd): 64 columns at a time, then the rest
// in narrower vectors, so that narrow heads (stories260K's 8) run in vectors too. Every
// column takes the same operations in the same order whichever width holds it.
template <int R>
void accumulate_values(float* o, const float* alpha, const float* p, int stride, const float* v, int64_t ld, int n,
                       int64_t hd) {
  int64_t d = 0;
  for (; d + 64 <= hd; d += 64)
    accumulate_columns<kTileLanes, 64 / kTileLanes, R>(o + d, hd, alpha, p, stride, v + d, ld, n);
  if (kTileLanes >= 16 && d + 16 <= hd) {
    accumulate_columns<16, 1, R>(o + d, hd, alpha, p, stride, v + d, ld, n);
    d += 16;
  }
  for (; d + 8 <= hd; d += 8) accumulate_columns<8, 1, R>(o + d, hd, alpha, p, stride, v + d, ld, n);
  for (; d + 4 <= hd; d += 4) accumulate_columns<4, 1, R>(o + d, hd, alpha, p, stride, v + d, ld, n);
  for (; d < hd; ++d) accumulate_columns<1, 1, R>(o + d, hd, alpha, p, stride, v + d, ld, n);
}

// Lanes whose values one pass sums together: AVX-512's 32 registers hold four lanes' 64
// columns (16 sums) beside the values; AVX2's 16 hold one lane's.
constexpr int kValueLanes = kTileLanes >= 16 ? 4 : 1;

// A tile of `Lanes` lanes; the caller picks the narrowest that holds its queries, since an
// empty lane costs as much as a full one.
template <int Lanes>
class Tile {
 public:
  void run(const TileQuery* queries, int count, const HeadCache& kv, int64_t hd, float q_scale, float score_cap);

 private:
  using Scores = float[kChunk][Lanes];
  void scores(const float* kt, int32_t bs, int n, int64_t hd, Scores& s) const;

  std::vector<float> qt_, o_;  // [head_dim][Lanes] scaled queries; [Lanes][head_dim] outputs
};

// s[j][lane] = k_j · qt[:, lane] for the chunk's n keys, key j's dimension d at
// kt[d * bs + j] (the cache keeps keys transposed within a block); for j >= n any finite
// value, which the caller masks. A full chunk in a narrow tile (a decode row) takes its keys
// a dimension at a time, side by side in one vector, into one accumulator per query; any
// other multiplies each key element into all lanes at once. Either way a score is the same
// FMAs in the same order over d, so it does not depend on the way its tile took.
template <int Lanes>
void Tile<Lanes>::scores(const float* kt, int32_t bs, int n, int64_t hd, Scores& s) const {
  if constexpr (Lanes <= 4) {
    if (n == kChunk) {
      Vec<kChunk> acc[Lanes] = {};
      for (int64_t d = 0; d < hd; ++d) {
        Vec<kChunk> kd;
        std::memcpy(&kd, kt + d * bs, sizeof kd);
        for (int lane = 0; lane < Lanes; ++lane) acc[lane] += kd * qt_[static_cast<size_t>(d * Lanes + lane)];
      }
      for (int lane = 0; lane < Lanes; ++lane)
        for (int j = 0; j < kChunk; ++j) s[j][lane] = acc[lane][j];
      return;
    }
  }
  Vec<Lanes> acc[kChunk] = {};
  if (n == kChunk) {
    // Keys at fixed offsets from one pointer: sixteen pointers of their own spill registers.
    for (int64_t d = 0; d < hd; ++d) {
      Vec<Lanes> qd;
      std::memcpy(&qd, qt_.data() + d * Lanes, sizeof qd);
      const float* kd = kt + d * bs;
      for (int j = 0; j < kChunk; ++j) acc[j] += kd[j] * qd;
    }
  } else {
    const float* k[kChunk];
    for (int j = 0; j < kChunk; ++j) k[j] = kt + std::min(j, n - 1);  // no reads past the chunk
    for (int64_t d = 0; d < hd; ++d) {
      Vec<Lanes> qd;
      std::memcpy(&qd, qt_.data() + d * Lanes, sizeof qd);
      const int64_t at = d * bs;
      for (int j = 0; j < kChunk; ++j) acc[j] += k[j][at] * qd;
    }
  }
  std::memcpy(s, acc, sizeof acc);
}

template <int Lanes>
void Tile<Lanes>::run(const TileQuery* queries, int count, const HeadCache& kv, int64_t hd, float q_scale,
                      float score_cap) {
  qt_.assign(static_cast<size_t>(hd * Lanes), 0.0f);
  o_.assign(static_cast<size_t>(hd * Lanes), 0.0f);
  int32_t lo[Lanes], hi[Lanes];
  float m[Lanes], l[Lanes];
  // [first, last]: positions some query sees; [last_first, first_last]: those all of them see.
  int32_t first = std::numeric_limits<int32_t>::max(), last = std::numeric_limits<int32_t>::min();
  int32_t last_first = last, first_last = first;
  for (int lane = 0; lane < Lanes; ++lane) {
    m[lane] = kMasked;
    l[lane] = 0.0f;
    // A lane without a query sees nothing when masked; its state is never read.
    lo[lane] = lane < count ? queries[lane].first : std::numeric_limits<int32_t>::max();
    hi[lane] = lane < count ? queries[lane].last : std::numeric_limits<int32_t>::min();
    if (lane >= count) continue;
    first = std::min(first, lo[lane]);
    last = std::max(last, hi[lane]);
    last_first = std::max(last_first, lo[lane]);
    first_last = std::min(first_last, hi[lane]);
    for (int64_t d = 0; d < hd; ++d) qt_[static_cast<size_t>(d * Lanes + lane)] = queries[lane].q[d] * q_scale;
  }

  const KvCache& cache = *kv.cache;
  const int32_t bs = cache.block_size();
  const int64_t ld = cache.kv_dim();
  for (int32_t p = first; p <= last;) {
    const int32_t block = kv.block_table[p / bs], slot = p % bs;
    // Chunks end at fixed slots of the block, whatever position the tile starts from.
    const int32_t n = std::min(std::min(bs, slot - slot % kChunk + kChunk) - slot, last - p + 1);
    Scores s;
    scores(cache.keys(kv.layer, block) + kv.offset * bs + slot, bs, n, hd, s);
    if (score_cap > 0) scaled_tanh_inplace(&s[0][0], kChunk * Lanes, score_cap);
    if (n < kChunk || p < last_first || p + n - 1 > first_last) {
      for (int j = 0; j < kChunk; ++j) {
        const int32_t pos = p + j;
        for (int lane = 0; lane < Lanes; ++lane)
          s[j][lane] = j < n && lo[lane] <= pos && pos <= hi[lane] ? s[j][lane] : kMasked;
      }
    }
    // Online softmax: rescale what was summed so far by 2^(old max - new max).
    float shift[Lanes], alpha[Lanes];
    for (int lane = 0; lane < Lanes; ++lane) {
      float mx = m[lane];
      for (int j = 0; j < kChunk; ++j) {
        const float v = s[j][lane];
        mx = v > mx ? v : mx;
      }
      // Shifting by 0 while nothing is seen keeps -inf - -inf (NaN) out.
      shift[lane] = mx == kMasked ? 0.0f : mx;
      alpha[lane] = m[lane] - shift[lane];
      m[lane] = mx;
    }
    for (int j = 0; j < kChunk; ++j)
      for (int lane = 0; lane < Lanes; ++lane) s[j][lane] -= shift[lane];
    exp2_inplace(&s[0][0], kChunk * Lanes);
    exp2_inplace(alpha, Lanes);
    for (int lane = 0; lane < Lanes; ++lane) {
      float sum = 0.0f;
      for (int j = 0; j < kChunk; ++j) sum += s[j][lane];
      l[lane] = l[lane] * alpha[lane] + sum;
    }
    const float* v0 = cache.value(kv.layer, block, slot) + kv.offset;
    int lane = 0;
    for (; lane + kValueLanes <= count; lane += kValueLanes)
      accumulate_values<kValueLanes>(o_.data() + lane * hd, alpha + lane, &s[0][lane], Lanes, v0, ld, n, hd);
    for (; lane < count; ++lane) accumulate_values<1>(o_.data() + lane * hd, alpha + lane, &s[0][lane], Lanes, v0, ld, n, hd);
    p += n;
  }

  for (int lane = 0; lane < count; ++lane) {
    const float inv = 1.0f / l[lane];
    const float* ol = o_.data() + lane * hd;
    for (int64_t d = 0; d < hd; ++d) queries[lane].out[d] = ol[d] * inv;
  }
}

template <int Lanes>
void run_tile(const TileQuery* queries, int count, const HeadCache& kv, int64_t hd, float q_scale, float score_cap) {
  thread_local Tile<Lanes> tile;
  tile.run(queries, count, kv, hd, q_scale, score_cap);
}

}  // namespace

// A decode row brings one query per head of its KV head's group, often 2 to 4 (GQA), and its
// tile is alone: lanes beyond those would triple the scores and exponentials it computes.
void attend_tile(const TileQuery* queries, int count, const HeadCache& kv, int64_t hd, float q_scale, float score_cap) {
  if (count <= 2)
    run_tile<2>(queries, count, kv, hd, q_scale, score_cap);
  else if (count <= 4)
    run_tile<4>(queries, count, kv, hd, q_scale, score_cap);
  else if (count <= 8)
    run_tile<8>(queries, count, kv, hd, q_scale, score_cap);
  else
    run_tile<kTileLanes>(queries, count, kv, hd, q_scale, score_cap);
}

}  // namespace orzo::cpu::ORZO_ISA_NS
ORZO_TARGET_END
