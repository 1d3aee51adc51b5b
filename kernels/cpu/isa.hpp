#pragma once
// The instruction-set levels the CPU kernels are built for, and the one this process runs.
//
// The kernels whose speed is the vector unit's (kernels/cpu/isa/) are compiled once per
// level, each into a namespace of its own, and gathered into one KernelTable per level.
// The first call to kernels() picks the best level this CPU runs, so one binary runs every
// x86-64 machine at the speed of its widest unit; everything else is compiled for the
// baseline. A -march=native build has one level, the machine's.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "core/gate_activation.hpp"
#include "core/tensor.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/attention_tile.hpp"
#include "kernels/cpu/sampler_rows.hpp"

namespace orzo::cpu {

// Ordered: each level runs everything the ones before it do.
enum class Isa {
  Portable,    // no vector extension beyond the baseline: the compiler's own code
  Avx2,        // AVX2 + FMA + F16C (x86-64-v3: Haswell, Zen 1 and later)
  Avx512Vnni,  // AVX-512 F/BW/VL/DQ/CD + VNNI (Ice Lake, Cascade Lake, Sapphire Rapids, Zen 4)
  Avx512Bf16,  // the same + AVX-512 BF16 (Cooper Lake, Sapphire Rapids, Zen 4): matmul_bf16
  Avx512Amx,   // the same + AMX tiles with BF16 (Sapphire Rapids and later): matmul_tiles
};

constexpr Isa kAllIsas[] = {Isa::Portable, Isa::Avx2, Isa::Avx512Vnni, Isa::Avx512Bf16, Isa::Avx512Amx};

const char* isa_name(Isa isa);  // "portable", "avx2", "avx512-vnni", "avx512-bf16", "avx512-amx"
std::string isa_names();        // all of them, comma-separated, for messages
std::optional<Isa> parse_isa(std::string_view name);

// The depth of k an AMX tile takes a step: KernelTable::matmul_tiles wants k a multiple of
// it.
constexpr int64_t kBf16TileDepth = 32;

// The most activation rows KernelTable::matmul_q16_gemv takes.
constexpr int64_t kGemvMaxRows = 2;

using MatmulKernel = void (*)(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                              const float* bias);

// A product prepared (x rounded or packed as its kernel reads it) and split by output
// columns: rows(state, begin, end) writes y's columns [begin, end), begin a multiple of
// grain, on whichever thread calls it. So products that read one x can share a parallel
// region (matmuls() in matmul.hpp). The state is the preparing thread's, in one of its
// kRowsJobSlots slots, and lives until that thread prepares into the slot again.
struct RowsJob {
  const void* state;
  void (*rows)(const void* state, int64_t begin, int64_t end);
  int64_t n, grain;
  size_t row_bytes;  // of a weight row: what a column costs, for sharing columns out
};
constexpr int kRowsJobSlots = 3;

// The RowsJob of a prepared product kept in `slot`, whose range(job, begin, end) computes
// the columns [begin, end) of its job (a kernel's own Job type with n and row_bytes).
template <class Slot>
RowsJob rows_job(const Slot& slot, int64_t grain) {
  const auto rows = [](const void* state, int64_t begin, int64_t end) {
    const auto& s = *static_cast<const Slot*>(state);
    s.range(s.job, begin, end);
  };
  return {&slot, rows, slot.job.n, grain, slot.job.row_bytes};
}
using RowsKernel = RowsJob (*)(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                               const float* bias, int slot);

// The whole product: its columns shared out to the pool's threads.
inline void run_rows(ThreadPool& pool, const RowsJob& job) {
  pool.parallel_for(job.n, [&](int64_t begin, int64_t end, int) { job.rows(job.state, begin, end); }, job.grain);
}

// One level's kernels. The public entry points (matmul.hpp, attention.hpp, convert.hpp)
// call the active table's; tests and benchmarks may call any runnable level's directly.
struct KernelTable {
  Isa isa;
  RowsKernel matmul_direct;  // matmul_direct.hpp
  // Where matmul() hands f32 products to sgemm: never while x (m * k * 4 bytes) stays within
  // direct_l2_bytes; past that, past direct_max_rows rows or direct_max_bytes bytes.
  // Measured per level (matmul_bench threshold/*).
  int64_t direct_l2_bytes;
  int64_t direct_max_rows;
  int64_t direct_max_bytes;
  bool (*matmul_q8_supports)(DType t);
  MatmulKernel matmul_q8;  // matmul_q8.hpp
  // The same types with activations in two int8 digits (matmul_q8.hpp); null where the
  // level has none.
  MatmulKernel matmul_q16;
  // matmul_q16 for at most kGemvMaxRows rows, the weights read as stored: the same rounding
  // of x, its sums in another order (on AVX2 the same order). Null where matmul_q16 is.
  RowsKernel matmul_q16_gemv;
  // Past this many bytes of x (m * k * 4) matmul() hands block types to sgemm where its
  // OpenBLAS suits the CPU, as for float weights: measured per level (matmul_bench q8/).
  int64_t q16_max_bytes;
  // Whether the level's kernels read TensorView::packed where a backend packed rows of
  // type t (packed_rows.hpp): matmul_q16_gemv for block types, matmul_packed_f16 for F16,
  // matmul_bf16 for BF16 (under bf16 activations: matmul.hpp's reads_packed_rows), which
  // gain by it; a copy worth making only for a level and type that do. Every kernel of the
  // level takes the rows it packs (the others unpack them), so that no product reads the
  // stored ones.
  bool (*reads_packed_rows)(DType t);
  // Packed Q4_K rows against activations rounded to two digits as matmul_q16 rounds them,
  // kept as one 16-bit word each, at any m: the gemv's arithmetic for every row, bit for
  // bit. Null where the level has none: AVX2's alone, whose two digits on bytes cost twice
  // the words' integer operations (DESIGN.md).
  RowsKernel matmul_packed_words;
  // Packed F16 rows against f32 activations, at any m: exact on the stored values, each
  // output summed in one order whatever m (isa/panel_product.hpp). Null where the level
  // reads F16 rows as stored (portable, AMX).
  RowsKernel matmul_packed_f16;
  // Under MatmulOptions::int8_batches, from how many rows block types round activations to
  // one int8 digit (matmul_q8): where the level has no AMX tiles to take their batches, two
  // digits cost twice one digit's integer operations (kernel_table.cpp). 0: never.
  int64_t one_digit_from_rows;
  // BF16 weights against activations rounded to bf16 (matmul.hpp, MatmulOptions::bf16_activations);
  // null where the level has no BF16 dot product.
  RowsKernel matmul_bf16;
  // matmul_bf16's arithmetic on AMX tiles (bf16 pairs, f32 sums in another order), for
  // rows of k a multiple of kBf16TileDepth: BF16 weights as stored, F16 and block types
  // decoded (kernels/cpu/isa/matmul_amx.cpp); null where the level has no AMX.
  MatmulKernel matmul_tiles;
  // From how many rows matmul() hands weights of type t to matmul_tiles (measured per type:
  // kernel_table.cpp); 0 for the types it does not take.
  int64_t (*tiles_from_rows)(DType t);
  int tile_lanes;          // attention queries per tile, <= kMaxTileLanes
  void (*attend_tile)(const TileQuery* queries, int count, const HeadCache& kv, int64_t head_dim, float q_scale,
                      float score_cap);
  // F16/BF16 rows to and from f32 (convert.hpp), t being one of the two.
  void (*half_row_to_f32)(DType t, const uint8_t* src, int64_t n, float* dst);
  void (*f32_row_to_half)(DType t, const float* src, int64_t n, uint8_t* dst);
  void (*gated_row)(GateActivation activation, float* gate, const float* up, int64_t n, float* scratch);  // gated_row.hpp
  // sampler_rows.hpp
  void (*exp_rows)(const float* x, int64_t n, float shift, float divisor, float* out);
  float (*max_row)(const float* x, int64_t n);
  int64_t (*first_above)(const float* x, int64_t begin, int64_t n, float floor);
  void (*bucket_rows)(const float* x, const float* w, int64_t n, const BucketScale& scale, uint16_t* out);
  void (*mask_row)(const uint64_t* allowed, float* logits, int64_t n);
};

// The active level's table. Until use_isa() is called it is the best runnable level, or the
// one the environment variable ORZO_CPU_ISA names (an error if this CPU cannot run it).
const KernelTable& kernels();

// The levels this binary has and this CPU runs, lowest first.
std::vector<Isa> runnable_isas();

// A runnable level's table; throws std::invalid_argument, naming the runnable ones, otherwise.
const KernelTable& kernels_for(Isa isa);

// Makes `isa` the active level for the whole process (tests, benchmarks, `--cpu-isa`).
// Not meant to race with kernels running on other threads.
void use_isa(Isa isa);

// The x86 cores where matmul() was measured to want other sizes and kernels. Intel's
// AVX-512 cores and AMD's from Zen 5 (CPUID family 0x1A) issue two 512-bit FMAs a cycle,
// where Zen 4 splits each in two 256-bit halves: sgemm's blocking fills both, the direct
// kernel, bound by its loads and conversions, does not. So on them sgemm takes over from
// fewer rows (kernel_table.cpp), each at its own measured sizes, and only on OpenBLAS's
// AVX-512 kernels (blas_core_for in matmul_blas.hpp).
enum class CoreKind { Other, Intel, Zen5 };
CoreKind core_kind();

// The CPU's model name as the OS gives it ("AMD EPYC 7763 64-Core Processor"), for logs
// and benchmark records; "unknown CPU" where it gives none.
std::string cpu_model_name();

}  // namespace orzo::cpu
