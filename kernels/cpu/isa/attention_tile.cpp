// One tile of attention (kernels/cpu/attention_tile.hpp says what it computes).
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
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

// The helpers below hold a tile's registers in their references: a call, which GCC's
// inliner makes once the tile is instantiated for both cache types, spills them all.
#define ORZO_INLINE inline __attribute__((always_inline))

// N consecutive keys or values as the cache stores them, in f32: an f16 cache's are widened
// as they are loaded (exactly: every f16 is an f32), so the arithmetic after is the same.
// Out parameters: a vector returned by value changes the ABI in the portable level (-Wpsabi).
template <int N>
ORZO_INLINE void load(const float* p, Vec<N>& x) {
  std::memcpy(&x, p, sizeof x);
}
template <int N>
ORZO_INLINE void load(const uint16_t* p, Vec<N>& x) {
  f16_row_to_f32(p, N, reinterpret_cast<float*>(&x));
}
inline float load1(const float* p) { return *p; }
inline float load1(const uint16_t* p) {
  Vec<1> x;
  load<1>(p, x);
  return x[0];
}

// acc = a * b + acc, rounded once where the ISA level has FMA. The tile's products and sums
// are fused here, by hand, not left to the compiler: which ones GCC fuses varies with what
// it inlines, so a query's sums could differ by a rounding between tile widths, or between
// an f32 cache's loads and an f16 cache's, and batch invariance would rest on the optimizer.
// (Without FMA, as in the portable level, nothing is fused.) Casts between vector types of
// one size keep everything in registers.
template <int N>
ORZO_INLINE void fma_into(Vec<N>& acc, const Vec<N>& a, const Vec<N>& b) {
#if ORZO_SIMD_AVX512
  if constexpr (N == 16) {
    acc = (Vec<16>)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)acc);
    return;
  }
#endif
#if ORZO_SIMD_AVX2
  if constexpr (N == 16) {
    Vec<8> x[2], y[2], z[2];
    std::memcpy(x, &a, sizeof x);
    std::memcpy(y, &b, sizeof y);
    std::memcpy(z, &acc, sizeof z);
    for (int h = 0; h < 2; ++h) fma_into<8>(z[h], x[h], y[h]);
    std::memcpy(&acc, z, sizeof z);
  } else if constexpr (N == 8) {
    acc = (Vec<8>)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)acc);
  } else if constexpr (N == 4) {
    acc = (Vec<4>)_mm_fmadd_ps((__m128)a, (__m128)b, (__m128)acc);
  } else if constexpr (N == 2) {
    Vec<4> x{a[0], a[1]}, y{b[0], b[1]}, z{acc[0], acc[1]};
    fma_into<4>(z, x, y);
    acc = Vec<2>{z[0], z[1]};
  } else {
    static_assert(N == 1);
    acc[0] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a[0]), _mm_set_ss(b[0]), _mm_set_ss(acc[0])));
  }
#else
  acc = a * b + acc;
#endif
}
// A scalar in every lane (a broadcast, which an FMA can take straight from memory).
template <int N>
ORZO_INLINE void splat(float s, Vec<N>& x) {
#if ORZO_SIMD_AVX512
  if constexpr (N == 16) {
    x = (Vec<16>)_mm512_set1_ps(s);
    return;
  }
#endif
#if ORZO_SIMD_AVX2
  if constexpr (N == 8) {
    x = (Vec<8>)_mm256_set1_ps(s);
    return;
  } else if constexpr (N == 4) {
    x = (Vec<4>)_mm_set1_ps(s);
    return;
  }
#endif
  for (int i = 0; i < N; ++i) x[i] = s;
}

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
template <int W, int Vecs, int R, int KeyStride, int LaneStride, typename T>
ORZO_INLINE void accumulate_columns(float* o, int64_t o_stride, const float* alpha, const float* p, const T* v,
                                    int64_t ld, int begin, int end) {
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
    const T* vj = v + j * ld;
    for (int c = 0; c < Vecs; ++c) {
      Vec<W> x;
      load<W>(vj + c * W, x);
      for (int r = 0; r < R; ++r) {
        Vec<W> pr;
        splat<W>(p[j * KeyStride + r * LaneStride], pr);
        fma_into<W>(acc[chain][r][c], pr, x);
      }
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
template <int R, int KeyStride, int LaneStride, typename T>
ORZO_INLINE void accumulate_values(float* o, const float* alpha, const float* p, const T* v, int64_t ld, int begin,
                                   int end, int64_t hd) {
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
  // reads it; the window's keys (transposed, bs apart) and values in the cache, T its element.
  template <typename T>
  struct Chunk {
    int32_t base, begin, end;
    const T* k;
    const T* v;
    int32_t bs;
    int64_t ld, hd;
    float score_cap;
    int count;
  };

  // The chunks of positions [first, last], each scored, weighed and summed; T is the cache's element.
  template <typename T>
  void walk(const HeadCache& kv, int32_t first, int32_t last, int64_t hd, float score_cap, int count, float* m, float* l);
  // Fills s with the chunk's scores; true when it left them by lane.
  template <typename T>
  bool scores(const Chunk<T>& c, float* s) const;
  template <bool Add, typename T>
  void scores_by_key(const Chunk<T>& c, int64_t from, int64_t to, float* s) const;
  // Caps, masks and softmaxes the chunk's scores, (key j, lane) at s[j * KeyStride + lane *
  // LaneStride]: a vector per key over the lanes (Lanes, 1) or one per lane over the keys
  // (1, kChunk); then sums the chunk's values into o_.
  template <int KeyStride, int LaneStride, typename T>
  void weigh(const Chunk<T>& c, float* s, float* m, float* l);
  // The chunk's values v (ld apart), weighted by s, into o_.
  template <int KeyStride, int LaneStride, typename T, typename V>
  void sum_values(const Chunk<T>& c, const float* s, const float* alpha, const V* v, int64_t ld);

  std::vector<float> qt_, o_;        // [head_dim][Lanes] scaled queries; [Lanes][head_dim] outputs
  std::vector<float> vt_;            // [kChunk][head_dim]: an f16 chunk's values, widened for a wide tile
  int32_t lo_[Lanes], hi_[Lanes];    // the positions each lane sees
  int32_t last_first_, first_last_;  // the positions every lane sees
};

// s[j][lane] (+)= k_j[from, to) · qt[from, to)[lane] for the chunk's keys (any finite value
// outside [begin, end), which weigh masks), key j's dimension d at k[d * bs + j] (the cache keeps keys
// transposed within a block): each key element multiplied into all lanes at once.
template <int Lanes>
template <bool Add, typename T>
void Tile<Lanes>::scores_by_key(const Chunk<T>& c, int64_t from, int64_t to, float* s) const {
  Vec<Lanes> acc[kChunk] = {};
  if (c.begin == 0 && c.end == kChunk) {
    // Keys at fixed offsets from one pointer: sixteen pointers of their own spill registers.
    for (int64_t d = from; d < to; ++d) {
      Vec<Lanes> qd;
      std::memcpy(&qd, qt_.data() + d * Lanes, sizeof qd);
      const float* kd;
      alignas(64) float widened[kChunk];  // an f16 cache's keys, widened at once, taken one at a time
      if constexpr (std::is_same_v<T, float>) {
        kd = c.k + d * c.bs;
      } else {
        Vec<kChunk> wide;
        load<kChunk>(c.k + d * c.bs, wide);
        std::memcpy(widened, &wide, sizeof widened);
        kd = widened;
      }
      for (int j = 0; j < kChunk; ++j) {
        Vec<Lanes> kj;
        splat<Lanes>(kd[j], kj);
        fma_into<Lanes>(acc[j], kj, qd);
      }
    }
  } else {
    const T* k[kChunk];
    for (int j = 0; j < kChunk; ++j) k[j] = c.k + std::clamp(j, c.begin, c.end - 1);  // no reads outside the chunk
    for (int64_t d = from; d < to; ++d) {
      Vec<Lanes> qd;
      std::memcpy(&qd, qt_.data() + d * Lanes, sizeof qd);
      const int64_t at = d * c.bs;
      for (int j = 0; j < kChunk; ++j) {
        Vec<Lanes> kj;
        splat<Lanes>(load1(k[j] + at), kj);
        fma_into<Lanes>(acc[j], kj, qd);
      }
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
template <typename T>
bool Tile<Lanes>::scores(const Chunk<T>& c, float* s) const {
  const int64_t half = c.hd / 2;
  if constexpr (Lanes <= 4) {
    if (c.begin == 0 && c.end == kChunk) {
      Vec<kChunk> lo[Lanes] = {}, hi[Lanes] = {};
      for (int64_t d = 0; d < half; ++d) {
        Vec<kChunk> kd, ke;
        load<kChunk>(c.k + d * c.bs, kd);
        load<kChunk>(c.k + (half + d) * c.bs, ke);
        for (int lane = 0; lane < Lanes; ++lane) {
          Vec<kChunk> qd, qe;
          splat<kChunk>(qt_[static_cast<size_t>(d * Lanes + lane)], qd);
          splat<kChunk>(qt_[static_cast<size_t>((half + d) * Lanes + lane)], qe);
          fma_into<kChunk>(lo[lane], kd, qd);
          fma_into<kChunk>(hi[lane], ke, qe);
        }
      }
      if (c.hd % 2 != 0) {
        Vec<kChunk> ke;
        load<kChunk>(c.k + (c.hd - 1) * c.bs, ke);
        for (int lane = 0; lane < Lanes; ++lane) {
          Vec<kChunk> qe;
          splat<kChunk>(qt_[static_cast<size_t>((c.hd - 1) * Lanes + lane)], qe);
          fma_into<kChunk>(hi[lane], ke, qe);
        }
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
template <int KeyStride, int LaneStride, typename T>
void Tile<Lanes>::weigh(const Chunk<T>& c, float* s, float* m, float* l) {
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
  for (int lane = 0; lane < Lanes; ++lane) {
    Vec<1> acc{sum[lane]}, x{l[lane]}, a{alpha[lane]};
    fma_into<1>(acc, x, a);
    l[lane] = acc[0];
  }
  if constexpr (std::is_same_v<T, uint16_t> && Lanes > kValueLanes) {
    // Several passes of lanes sum each value: widened once for all of them. Only the chunk's
    // slots [begin, end), since the rest of the window may be another sequence's.
    vt_.resize(static_cast<size_t>(c.hd * kChunk));
    for (int j = c.begin; j < c.end; ++j) f16_row_to_f32(c.v + j * c.ld, c.hd, vt_.data() + j * c.hd);
    sum_values<KeyStride, LaneStride>(c, s, alpha, vt_.data(), c.hd);
  } else {
    sum_values<KeyStride, LaneStride>(c, s, alpha, c.v, c.ld);
  }
}

template <int Lanes>
template <int KeyStride, int LaneStride, typename T, typename V>
void Tile<Lanes>::sum_values(const Chunk<T>& c, const float* s, const float* alpha, const V* v, int64_t ld) {
  int lane = 0;
  if constexpr (Lanes >= kValueLanes)
    for (; lane + kValueLanes <= c.count; lane += kValueLanes)
      accumulate_values<kValueLanes, KeyStride, LaneStride>(o_.data() + lane * c.hd, alpha + lane,
                                                            s + lane * LaneStride, v, ld, c.begin, c.end, c.hd);
  for (; lane < c.count; ++lane)
    accumulate_values<1, KeyStride, LaneStride>(o_.data() + lane * c.hd, alpha + lane, s + lane * LaneStride, v, ld,
                                                c.begin, c.end, c.hd);
}

template <int Lanes>
template <typename T>
void Tile<Lanes>::walk(const HeadCache& kv, int32_t first, int32_t last, int64_t hd, float score_cap, int count,
                       float* m, float* l) {
  const KvCache& cache = *kv.cache;
  const int32_t bs = cache.block_size();
  for (int32_t p = first; p <= last;) {
    const int32_t block = kv.block_table[p / bs], slot = p % bs;
    // Windows start at fixed slots of the block, whatever position the tile starts from.
    const int32_t begin = slot % kChunk, window = slot - begin;
    // The next block's keys and values, fetched while this one is weighed: the batcher's
    // blocks of one sequence lie wherever the pool had them free, each a few hundred bytes
    // of this head, too short a run for the hardware prefetchers to follow.
    if (window == 0 && (p / bs + 1) * bs <= last) {
      const int32_t next = kv.block_table[p / bs + 1];
      const char* keys = reinterpret_cast<const char*>(cache.keys<T>(kv.plane, next) + kv.offset * bs);
      for (int64_t b = 0; b < hd * bs * static_cast<int64_t>(sizeof(T)); b += 64) __builtin_prefetch(keys + b, 0, 3);
      for (int32_t s = 0; s < bs; ++s) __builtin_prefetch(cache.value<T>(kv.plane, next, s) + kv.offset, 0, 3);
    }
    const int32_t n = std::min(std::min(bs, window + kChunk) - slot, last - p + 1);
    const Chunk<T> c{p - begin, begin, begin + n, cache.keys<T>(kv.plane, block) + kv.offset * bs + window,
                     cache.value<T>(kv.plane, block, window) + kv.offset, bs, cache.kv_dim(), hd, score_cap, count};
    alignas(64) float s[kChunk * Lanes];
    if (scores(c, s))
      weigh<1, kChunk>(c, s, m, l);
    else
      weigh<Lanes, 1>(c, s, m, l);
    p += n;
  }
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

  if (kv.cache->dtype() == DType::F16)
    walk<uint16_t>(kv, first, last, hd, score_cap, count, m, l);
  else
    walk<float>(kv, first, last, hd, score_cap, count, m, l);

  for (int lane = 0; lane < count; ++lane) {
    const float inv = 1.0f / l[lane];
    const float* ol = o_.data() + lane * hd;
    for (int64_t d = 0; d < hd; ++d) queries[lane].out[d] = ol[d] * inv;
    if (float* stats = queries[lane].stats) {
      stats[0] = m[lane];
      stats[1] = l[lane];
    }
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
