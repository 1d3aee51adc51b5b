#pragma once
// The prefill-sized product: compute bound, so it runs on OpenBLAS. Each pool thread owns
// a slice of the weight rows, widens it to f32 a tile at a time into its own scratch, and
// multiplies the tile with a single-threaded sgemm.
#include <array>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "core/tensor.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/isa.hpp"

namespace orzo::cpu {

// OpenBLAS picks its kernels by the CPU models it knows, at load time. A model newer than
// the library falls back to its oldest kernels: Debian 12's 0.3.21 takes an Emerald Rapids
// (family 6, model 207) for a "Prescott", SSE3 only, and multiplies at 30 GFLOP/s where its
// Cooperlake kernels reach 200 (docs/BENCHMARKS.md, "On an Emerald Rapids"). AVX2 kernels
// fall short too where the CPU runs 512-bit operations at full width: a Zen 5 (family
// 0x1A) made to run the Haswell kernels (OPENBLAS_CORETYPE=Haswell, as one workplace's
// environment sets it) multiplies at 190 GFLOP/s where the Cooperlake kernels, 0.3.21's
// own choice there, reach 350 ("A gemv for decode, on a Zen 5").
// The OPENBLAS_CORETYPE that suits orzo's kernels at `level` on a CPU whose cores are of
// kind `kind` (isa.hpp), or null where `core` (openblas_get_corename()) already uses the
// vector units that level has: AVX2 kernels serve an AVX-512 level only where the CPU splits
// each 512-bit operation in two (CoreKind::Other). The AVX2 level is served by AVX2 kernels
// only, so that `--cpu-isa avx2` on an AVX-512 CPU runs every product as an AVX2 machine runs
// it (its prompts included, which sgemm takes), the way its benchmarks are read. The portable
// level runs whatever OpenBLAS chose: it is there to check the kernels, not to time them.
const char* blas_core_for(std::string_view core, Isa level, CoreKind kind);

struct BlasCore {
  std::string name;  // the kernels OpenBLAS runs here
  std::array<const char*, std::size(kAllIsas)> short_of;  // blas_core_for(name, level, this CPU) by level
  // Non-null where OpenBLAS's kernels fall short of (or, for AVX2, go beyond) `level`.
  const char* suited(Isa level) const { return short_of[static_cast<size_t>(level)]; }
};
const BlasCore& blas_core();

// For a program's main(): where blas_core().suited(level) is set for the level it will run
// (`level`, the one its command line names, else ORZO_CPU_ISA's, else the CPU's best) and
// OPENBLAS_CORETYPE is not, sets it and executes this program again with the same arguments,
// since OpenBLAS reads it only when it loads. Returns where that is not needed or the exec
// fails (matmul() then keeps off sgemm).
void rerun_with_suited_blas(char** argv, std::optional<Isa> level = std::nullopt);

// For a program's main() that leaves sgemm to orzo: OpenBLAS's pthread build starts a server
// thread per core when it loads, and each spins on sched_yield for about 2^28 cycles (0.1 s)
// before it sleeps. orzo calls sgemm one thread at a time and never uses them, but their spin
// took one of a 2-core machine's cores for the first 0.1 s of every command (a fifth of a
// short bench, the first tokens of a generate). Stops them where the library can.
void stop_blas_server_threads();

// matmul() for any m >= 1; the caller has validated the shapes. matmul() leaves it alone
// while blas_core().suited(level) is set: the direct kernel is faster than sgemm's fallback.
void matmul_blas(const float* x, int64_t m, const TensorView& w, float* y, ThreadPool& pool,
                 const float* bias);

}  // namespace orzo::cpu
