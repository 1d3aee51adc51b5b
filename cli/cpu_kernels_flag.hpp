#pragma once
// The CPU kernels' flags, which every subcommand that runs a model shares: --cpu-isa, the
// ISA level of the kernels (kernels/cpu/isa.hpp), the best this CPU runs unless named, and
// how activations are rounded, and what the KV cache stores.

#include <optional>
#include <string>

#include "core/dtype.hpp"
#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/matmul_options.hpp"

namespace CLI {
class App;
}

namespace orzo::cli {

void add_cpu_isa_flag(CLI::App& cmd, std::string& isa);

// The level --cpu-isa names in a command line not yet parsed (main(), before OpenBLAS's
// kernels are settled), or none where it names none or no level.
std::optional<cpu::Isa> cpu_isa_in(char** argv);

// The CPU's arithmetic (kernels/cpu/matmul.hpp's MatmulOptions): --int8-activations,
// --bf16-activations / --f32-activations, --int8-batches / --no-int8-batches and
// --batch-invariant, each defaulting to what `matmul` holds.
void add_matmul_flags(CLI::App& cmd, cpu::MatmulOptions& matmul);

// --kv-cache-dtype auto|f32|f16 (StageOptions::kv_cache_dtype); auto is f32, the activations'.
void add_kv_cache_dtype_flag(CLI::App& cmd, DType& dtype);

// Makes the named level active (or, for "", the best one, or ORZO_CPU_ISA's) before any
// kernel runs, so a level this CPU lacks is refused here, in one line, not in a worker.
// Returns a line for the log: the CPU's model and the level that runs.
std::string select_cpu_kernels(const std::string& isa);

// How the active level multiplies quantized weights under `o`, for the log: "quantized weights
// on two int8 digits, one digit from 32 rows (not in scoring steps)".
std::string quantized_arithmetic(const cpu::MatmulOptions& o);

}  // namespace orzo::cli
