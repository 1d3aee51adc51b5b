#pragma once
// --cpu-isa, which every subcommand that runs a model shares: the ISA level of the CPU
// kernels (kernels/cpu/isa.hpp), the best this CPU runs unless named.

#include <string>

namespace CLI {
class App;
}

namespace orzo::cli {

void add_cpu_isa_flag(CLI::App& cmd, std::string& isa);

// Makes the named level active (or, for "", the best one, or ORZO_CPU_ISA's) before any
// kernel runs, so a level this CPU lacks is refused here, in one line, not in a worker.
// Returns a line for the log: the CPU's model and the level that runs.
std::string select_cpu_kernels(const std::string& isa);

// Where OpenBLAS fell back to kernels short of this CPU's (kernels/cpu/matmul_blas.hpp)
// and OPENBLAS_CORETYPE is unset, sets it to the suited core and executes this program
// again with the same arguments, since OpenBLAS reads it only when it loads. Returns
// where that is not needed or the exec fails; matmul() then keeps off sgemm.
void rerun_with_suited_blas(char** argv);

}  // namespace orzo::cli
