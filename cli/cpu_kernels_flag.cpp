#include "cli/cpu_kernels_flag.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "kernels/cpu/isa.hpp"

namespace orzo::cli {

void add_cpu_isa_flag(CLI::App& cmd, std::string& isa) {
  std::vector<std::string> names;
  for (cpu::Isa level : cpu::kAllIsas) names.emplace_back(cpu::isa_name(level));
  cmd.add_option("--cpu-isa", isa,
                 "CPU kernels: " + cpu::isa_names() + " (default: the best this CPU runs, or $ORZO_CPU_ISA)")
      ->check(CLI::IsMember(names));
}

std::string select_cpu_kernels(const std::string& isa) {
  if (isa.empty())
    cpu::kernels();
  else
    cpu::use_isa(*cpu::parse_isa(isa));
  return "CPU " + cpu::cpu_model_name() + ", kernels " + cpu::isa_name(cpu::kernels().isa);
}

}  // namespace orzo::cli
