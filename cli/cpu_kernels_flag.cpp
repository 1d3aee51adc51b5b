#include "cli/cpu_kernels_flag.hpp"

#include <CLI/CLI.hpp>

#include "kernels/cpu/isa.hpp"

namespace orzo::cli {

void add_cpu_isa_flag(CLI::App& cmd, std::string& isa) {
  cmd.add_option("--cpu-isa", isa,
                 "CPU kernels: portable, avx2 or avx512-vnni (default: the best this CPU runs, or $ORZO_CPU_ISA)")
      ->check(CLI::IsMember({"portable", "avx2", "avx512-vnni"}));
}

std::string select_cpu_kernels(const std::string& isa) {
  if (isa.empty())
    cpu::kernels();
  else
    cpu::use_isa(*cpu::parse_isa(isa));
  return "CPU " + cpu::cpu_model_name() + ", kernels " + cpu::isa_name(cpu::kernels().isa);
}

}  // namespace orzo::cli
