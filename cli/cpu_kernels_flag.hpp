#pragma once
// The CPU kernels' flags, which every subcommand that runs a model shares: --cpu-isa, the
// ISA level of the kernels (kernels/cpu/isa.hpp), the best this CPU runs unless named, and
// how activations are rounded.

#include <string>

namespace CLI {
class App;
}

namespace orzo::cli {

void add_cpu_isa_flag(CLI::App& cmd, std::string& isa);

// --bf16-activations / --f32-activations (MatmulOptions::bf16_activations), on by default.
void add_bf16_activations_flag(CLI::App& cmd, bool& bf16_activations);

// Makes the named level active (or, for "", the best one, or ORZO_CPU_ISA's) before any
// kernel runs, so a level this CPU lacks is refused here, in one line, not in a worker.
// Returns a line for the log: the CPU's model and the level that runs.
std::string select_cpu_kernels(const std::string& isa);

}  // namespace orzo::cli
