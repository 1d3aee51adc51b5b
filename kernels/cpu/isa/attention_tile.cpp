// One tile of attention (kernels/cpu/attention_tile.hpp says what it computes).
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.hpp"
#include "core/kv_cache.hpp"
#include "kernels/cpu/isa/entry_points.hpp"
#include "kernels/cpu/isa/simd.hpp"

ORZO_TARGET_BEGIN
#include "kernels/cpu/exp2.hpp"
#include "kernels/cpu/isa/f16_row.hpp"
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

// Independent sums per column vector when a group has one vector a lane: a chunk's 16 keys
// in one chain would wait on the FMA's latency at every key (stories260K's heads of 8).
// Chains depend only on the group's width, never on R or the tile, so a lane's sums stay the
// same operations whichever tile holds it.
template <int Vecs>
constexpr int kValueChains = Vecs == 1 ? 4 : 1;

// For R lanes r of a tile side by side: o_r[0, W * Vecs) = o_r * alpha[r] + sum_j
// p[j * KeyStride + r * LaneStride] * v_j[0, W * Vecs) over the keys j in [begin, end) of a
// chunk's window, o_r at o + r * o_stride, the columns held in registers while the values
// are summed into them. Each value vector is loaded once for all R lanes; key j goes to
// chain j % C, and the chains are added pairwise at the end.
template <int W, int Vecs, int R, int KeyStride, int LaneStride>
void accumulate_columns(float* o, int64_t o_stride, const float* alpha, const float* p, const float* v, int64_t ld,
                        int begin, int end) {
  constexpr int C = kValueChains<Vecs>;
  Vec<W> acc[C][R][Vecs];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < Vecs; ++c) {
      Vec<W> x;
      std::memcpy(&x, o + r * o_stride + c * W, sizeof x);
      acc[0][r][c] = x * alpha[r];
      for (int chain = 1; chain < C; ++chain) acc[chain][r][c] = Vec<W>{};
    }
  const auto add_key = [&](int chain, int j) {
    const float* vj = v + j * ld;
    for (int c = 0; c < Vecs; ++c) {
      Vec<W> x;
      std::memcpy(&x, vj + c * W, sizeof x);
      for (int r = 0; r < R; ++r) acc[chain][r][c] += p[j * KeyStride + r * LaneStride] * x;
    }
  };
  if (begin == 0 && end == kChunk) {
    // Unrolled over the whole window, the keys' 16 row addresses spill to memory.
#pragma GCC unroll 1
    for (int j = 0; j < kChunk; j += C) {
#pragma GCC unroll 4
      for (int chain = 0; chain < C; ++chain) add_key(chain, j + chain);
    }
  } else {
    for (int j = begin - begin % C; j < end; j += C) {
#pragma GCC unroll 4
      for (int chain = 0; chain < C; ++chain)
        if (j + chain >= begin && j + chain < end) add_key(chain, j + chain);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < Vecs; ++c) {
      Vec<W> sum = acc[0][r][c];
      if constexpr (C == 4) sum = (sum + acc[1][r][c]) + (acc[2][r][c] + acc[3][r][c]);
      std::memcpy(o + r * o_stride + c * W, &sum, sizeof sum);
    }
}

// accumulate_columns over a whole head (o_stride = hd): 64 columns at a time, then the rest
// in narrower vectors, so that narrow heads (stories260K's 8) run in vectors too. Every
// column takes the same operations in the same order whichever width holds it.
template <int R, int KeyStride, int LaneStride>
void accumulate_values(float* o, const float* alpha, const float* p, const float* v, int64_t ld, int begin, int end,
                       int64_t hd) {
  int64_t d = 0;
  for (; d + 64 <= hd; d += 64)
    accumulate_columns<kTileLanes, 64 / kTileLanes, R, KeyStride, LaneStride>(o + d, hd, alpha, p, v + d, ld, begin, end);
  if (kTileLanes >= 16 && d + 16 <= hd) {
    accumulate_columns<16, 1, R, KeyStride, LaneStride>(o + d, hd, alpha, p, v + d, ld, begin, end);
    d += 16;
  }
  for (; d + 8 <= hd; d += 8) accumulate_columns<8, 1, R, KeyStride, LaneStride>(o + d, hd, alpha, p, v + d, ld, begin, end);
  for (; d + 4 <= hd; d += 4) accumulate_columns<4, 1, R, KeyStride, LaneStride>(o + d, hd, alpha, p, v + d, ld, begin, end);
  for (; d < hd; ++d) accumulate_columns<1, 1, R, KeyStride, LaneStride>(o + d, hd, alpha, p, v + d, ld, begin, end);
}

// Lanes whose values one pass sums together: AVX-512's 32 registers hold four lanes' 64
// columns (16 sums) beside the values; AVX2's 16 hold one lane's.
constexpr int kValueLanes = kTileLanes >= 16 ? 4 : 1;

// The halves of a vector, and a vector's elements folded as a tree (its halves added, then
// those halves' halves...): how weigh sums a lane's weights, in whichever layout they lie.
template <int N>
void halves(const Vec<N>& x, Vec<N / 2>& a, Vec<N / 2>& b) {
  std::memcpy(&a, &x, sizeof a);
  std::memcpy(&b, reinterpret_cast<const float*>(&x) + N / 2, sizeof b);
}
template <int N>
float fold_sum(const Vec<N>& x) {
  if constexpr (N == 1) {
    return x[0];
  } else {
    Vec<N / 2> a, b;
    halves<N>(x, a, b);
    return fold_sum<N / 2>(a + b);
  }
}
template <int N>
float fold_max(const Vec<N>& x) {
  if constexpr (N == 1) {
    return x[0];
  } else {
    Vec<N / 2> a, b;
    halves<N>(x, a, b);
    return fold_max<N / 2>(a > b ? a : b);
  }
}

// A tile of `Lanes` lanes; the caller picks the narrowest that holds its queries, since an
// empty lane costs as much as a full one.
template <int Lanes>
class Tile {
 public:
  void run(const TileQuery* queries, int count, const HeadCache& kv, int64_t hd, float q_scale, float score_cap);

 private:
  // A chunk: keys [begin, end) of a window of kChunk slots that starts at position `base`
  // (at a multiple of kChunk within its block), so that a key has the same place in the
  // scores, the chains of the value sums and the tree of the weights' sum whichever tile
  // reads it; the window's keys (transposed, bs apart) and values in the cache.
  struct Chunk {
    int32_t base, begin, end;
    const float* k;
    const float* v;
    int32_t bs;
    int64_t ld, hd;
    float score_cap;
    int count;
  };

  // Fills s with the chunk's scores; true when it left them by lane.
  bool scores(const Chunk& c, float* s) const;
  template <bool Add>
  void scores_by_key(const Chunk& c, int64_t from, int64_t to, float* s) const;
  // Caps, masks and softmaxes the chunk's scores, (key j, lane) at s[j * KeyStride + lane *
  // LaneStride]: a vector per key over the lanes (Lanes, 1) or one per lane over the keys
  // (1, kChunk); then sums the chunk's values into o_.
  template <int KeyStride, int LaneStride>
  void weigh(const Chunk& c, float* s, float* m, float* l);
  // An f16 cache's chunk widened to f32 in kt_/vt_, laid out as the f32 cache lays a
  // window (keys kChunk apart), so that the arithmetic is the f32 cache's on the same values.
  Chunk widened(const Chunk& c, const HeadCache& kv, int32_t block, int32_t window);

  std::vector<float> qt_, o_;        // [head_dim][Lanes] scaled queries; [Lanes][head_dim] outputs
  std::vector<float> kt_, vt_;       // [head_dim][kChunk] keys, [kChunk][head_dim] values (an f16 cache's)
  int32_t lo_[Lanes], hi_[Lanes];    // the positions each lane sees
  int32_t last_first_, first_last_;  // the positions every lane sees
};

// s[j][lane] (+)= k_j[from, to) · qt[from, to)[lane] for the chunk's keys (any finite value
// outside [begin, end), which weigh masks), key j's dimension d at k[d * bs + j] (the cache keeps keys
// transposed within a block): each key element multiplied into all lanes at once.
template <int Lanes>
template <bool Add>
void Tile<Lanes>::scores_by_key(const Chunk& c, int64_t from, int64_t to, float* s) const {
  Vec<Lanes> acc[kChunk] = {};
  if (c.begin == 0 && c.end == kChunk) {
    // Keys at fixed offsets from one pointer: sixteen pointers of their own spill registers.
    for (int64_t d = from; d < to; ++d) {
      Vec<Lanes> qd;
      std::memcpy(&qd, qt_.data() + d * Lanes, sizeof qd);
      const float* kd = c.k + d * c.bs;
      for (int j = 0; j < kChunk; ++j) acc[j] += kd[j] * qd;
    }
  } else {
    const float* k[kChunk];
    for (int j = 0; j < kChunk; ++j) k[j] = c.k + std::clamp(j, c.begin, c.end - 1);  // no reads outside the chunk
    for (int64_t d = from; d < to; ++d) {
      Vec<Lanes> qd;
      std::memcpy(&qd, qt_.data() + d * Lanes, sizeof qd);
      const int64_t at = d * c.bs;
      for (int j = 0; j < kChunk; ++j) acc[j] += k[j][at] * qd;
    }
  }
  for (int j = 0; j < kChunk; ++j) {
    if constexpr (Add) {
      Vec<Lanes> sj;
      std::memcpy(&sj, s + j * Lanes, sizeof sj);
      acc[j] += sj;
    }
    std::memcpy(s + j * Lanes, &acc[j], sizeof acc[j]);
  }
}

// The chunk's scores, each k_j · q summed over the head's two halves apart and then added:
// two FMA chains a score where one would wait on the FMA's latency at every dimension. A
// full chunk in a narrow tile (a decode row) takes its keys a dimension at a time, side by
// side in one vector, into accumulators per query, and leaves them by lane; any other tile
// multiplies each key element into all lanes at once and leaves them by key. Either way a
// score is the same FMAs in the same order, so it does not depend on the way its tile took.
template <int Lanes>
bool Tile<Lanes>::scores(const Chunk& c, float* s) const {
  const int64_t half = c.hd / 2;
  if constexpr (Lanes <= 4) {
    if (c.begin == 0 && c.end == kChunk) {
      Vec<kChunk> lo[Lanes] = {}, hi[Lanes] = {};
      for (int64_t d = 0; d < half; ++d) {
        Vec<kChunk> kd, ke;
        std::memcpy(&kd, c.k + d * c.bs, sizeof kd);
        std::memcpy(&ke, c.k + (half + d) * c.bs, sizeof ke);
        for (int lane = 0; lane < Lanes; ++lane) {
          lo[lane] += kd * qt_[static_cast<size_t>(d * Lanes + lane)];
          hi[lane] += ke * qt_[static_cast<size_t>((half + d) * Lanes + lane)];
        }
      }
      if (c.hd % 2 != 0) {
        Vec<kChunk> ke;
        std::memcpy(&ke, c.k + (c.hd - 1) * c.bs, sizeof ke);
        for (int lane = 0; lane < Lanes; ++lane) hi[lane] += ke * qt_[static_cast<size_t>((c.hd - 1) * Lanes + lane)];
      }
      for (int lane = 0; lane < Lanes; ++lane) {
        const Vec<kChunk> sum = lo[lane] + hi[lane];
        std::memcpy(s + lane * kChunk, &sum, sizeof sum);
      }
      return true;
    }
  }
  scores_by_key<false>(c, 0, half, s);
  scores_by_key<true>(c, half, c.hd, s);
  return false;
}

template <int Lanes>
template <int KeyStride, int LaneStride>
void Tile<Lanes>::weigh(const Chunk& c, float* s, float* m, float* l) {
  constexpr bool kByLane = KeyStride == 1;
  if (c.score_cap > 0) scaled_tanh_inplace(s, kChunk * Lanes, c.score_cap);
  if (c.begin > 0 || c.end < kChunk || c.base < last_first_ || c.base + kChunk - 1 > first_last_) {
    for (int j = 0; j < kChunk; ++j) {
      const int32_t pos = c.base + j;
      for (int lane = 0; lane < Lanes; ++lane) {
        float& x = s[j * KeyStride + lane * LaneStride];
        x = c.begin <= j && j < c.end && lo_[lane] <= pos && pos <= hi_[lane] ? x : kMasked;
      }
    }
  }
  // Online softmax: rescale what was summed so far by 2^(old max - new max).
  float mx[Lanes], shift[Lanes], alpha[Lanes], sum[Lanes];
  if constexpr (kByLane) {
    for (int lane = 0; lane < Lanes; ++lane) {
      Vec<kChunk> x;
      std::memcpy(&x, s + lane * kChunk, sizeof x);
      mx[lane] = std::max(m[lane], fold_max<kChunk>(x));
    }
  } else {
    Vec<Lanes> top;
    std::memcpy(&top, m, sizeof top);
    for (int j = 0; j < kChunk; ++j) {
      Vec<Lanes> x;
      std::memcpy(&x, s + j * Lanes, sizeof x);
      top = x > top ? x : top;
    }
    std::memcpy(mx, &top, sizeof top);
  }
  for (int lane = 0; lane < Lanes; ++lane) {
    // Shifting by 0 while nothing is seen keeps -inf - -inf (NaN) out.
    shift[lane] = mx[lane] == kMasked ? 0.0f : mx[lane];
    alpha[lane] = m[lane] - shift[lane];
    m[lane] = mx[lane];
  }
  for (int j = 0; j < kChunk; ++j)
    for (int lane = 0; lane < Lanes; ++lane) s[j * KeyStride + lane * LaneStride] -= shift[lane];
  exp2_inplace(s, kChunk * Lanes);
  exp2_inplace(alpha, Lanes);
  // Each lane's weights summed as fold_sum folds a vector: halves first.
  if constexpr (kByLane) {
    for (int lane = 0; lane < Lanes; ++lane) {
      Vec<kChunk> x;
      std::memcpy(&x, s + lane * kChunk, sizeof x);
      sum[lane] = fold_sum<kChunk>(x);
    }
  } else {
    Vec<Lanes> t[kChunk / 2];
    for (int j = 0; j < kChunk / 2; ++j) {
      Vec<Lanes> a, b;
      std::memcpy(&a, s + j * Lanes, sizeof a);
      std::memcpy(&b, s + (j + kChunk / 2) * Lanes, sizeof b);
      t[j] = a + b;
    }
    for (int half = kChunk / 4; half > 0; half /= 2)
      for (int j = 0; j < half; ++j) t[j] += t[j + half];
    std::memcpy(sum, &t[0], sizeof t[0]);
  }
  for (int lane = 0; lane < Lanes; ++lane) l[lane] = l[lane] * alpha[lane] + sum[lane];
  int lane = 0;
  if constexpr (Lanes >= kValueLanes)
    for (; lane + kValueLanes <= c.count; lane += kValueLanes)
      accumulate_values<kValueLanes, KeyStride, LaneStride>(o_.data() + lane * c.hd, alpha + lane,
                                                            s + lane * LaneStride, c.v, c.ld, c.begin, c.end, c.hd);
  for (; lane < c.count; ++lane)
    accumulate_values<1, KeyStride, LaneStride>(o_.data() + lane * c.hd, alpha + lane, s + lane * LaneStride, c.v,
                                                c.ld, c.begin, c.end, c.hd);
}

template <int Lanes>
typename Tile<Lanes>::Chunk Tile<Lanes>::widened(const Chunk& c, const HeadCache& kv, int32_t block, int32_t window) {
  const KvCache& cache = *kv.cache;
  const int64_t hd = c.hd;
  kt_.resize(static_cast<size_t>(hd * kChunk));
  vt_.resize(static_cast<size_t>(hd * kChunk));
  // Only the chunk's keys [begin, end): the rest of the window may hold another sequence's.
  const int n = c.end - c.begin;
  const uint16_t* k = cache.keys<uint16_t>(kv.plane, block) + kv.offset * c.bs + window + c.begin;
  for (int64_t d = 0; d < hd; ++d) f16_row_to_f32(k + d * c.bs, n, kt_.data() + d * kChunk + c.begin);
  for (int j = c.begin; j < c.end; ++j)
    f16_row_to_f32(cache.value<uint16_t>(kv.plane, block, window + j) + kv.offset, hd, vt_.data() + j * hd);
  Chunk w = c;
  w.k = kt_.data();
  w.v = vt_.data();
  w.bs = kChunk;
  w.ld = hd;
  return w;
}

template <int Lanes>
void Tile<Lanes>::run(const TileQuery* queries, int count, const HeadCache& kv, int64_t hd, float q_scale,
                      float score_cap) {
  qt_.assign(static_cast<size_t>(hd * Lanes), 0.0f);
  o_.assign(static_cast<size_t>(hd * Lanes), 0.0f);
  float m[Lanes], l[Lanes];
  // [first, last]: positions some query sees; [last_first_, first_last_]: those all of them see.
  int32_t first = std::numeric_limits<int32_t>::max(), last = std::numeric_limits<int32_t>::min();
  last_first_ = last;
  first_last_ = first;
  for (int lane = 0; lane < Lanes; ++lane) {
    m[lane] = kMasked;
    l[lane] = 0.0f;
    // A lane without a query sees nothing when masked; its state is never read.
    lo_[lane] = lane < count ? queries[lane].first : std::numeric_limits<int32_t>::max();
    hi_[lane] = lane < count ? queries[lane].last : std::numeric_limits<int32_t>::min();
    if (lane >= count) continue;
    first = std::min(first, lo_[lane]);
    last = std::max(last, hi_[lane]);
    last_first_ = std::max(last_first_, lo_[lane]);
    first_last_ = std::min(first_last_, hi_[lane]);
    for (int64_t d = 0; d < hd; ++d) qt_[static_cast<size_t>(d * Lanes + lane)] = queries[lane].q[d] * q_scale;
  }

  const KvCache& cache = *kv.cache;
  const bool f16 = cache.dtype() == DType::F16;
  const int32_t bs = cache.block_size();
  for (int32_t p = first; p <= last;) {
    const int32_t block = kv.block_table[p / bs], slot = p % bs;
    // Windows start at fixed slots of the block, whatever position the tile starts from.
    const int32_t begin = slot % kChunk, window = slot - begin;
    const int32_t n = std::min(std::min(bs, window + kChunk) - slot, last - p + 1);
    Chunk c{p - begin, begin, begin + n, nullptr, nullptr, bs, cache.kv_dim(), hd, score_cap, count};
    if (f16) {
      c = widened(c, kv, block, window);
    } else {
      c.k = cache.keys<float>(kv.plane, block) + kv.offset * bs + window;
      c.v = cache.value<float>(kv.plane, block, window) + kv.offset;
    }
    alignas(64) float s[kChunk * Lanes];
    if (scores(c, s))
      weigh<1, kChunk>(c, s, m, l);
    else
      weigh<Lanes, 1>(c, s, m, l);
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
