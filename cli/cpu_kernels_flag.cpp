#include "cli/cpu_kernels_flag.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_blas.hpp"
#include "kernels/cpu/matmul_q8.hpp"
#include "runtime/cpu_backend.hpp"

namespace orzo::cli {

namespace {
constexpr std::string_view kCpuIsaFlag = "--cpu-isa";
}  // namespace

void add_cpu_isa_flag(CLI::App& cmd, std::string& isa) {
  std::vector<std::string> names;
  for (cpu::Isa level : cpu::kAllIsas) names.emplace_back(cpu::isa_name(level));
  cmd.add_option(std::string(kCpuIsaFlag), isa,
                 "CPU kernels: " + cpu::isa_names() + " (default: the best this CPU runs, or $ORZO_CPU_ISA)")
      ->check(CLI::IsMember(names));
}

std::optional<cpu::Isa> cpu_isa_in(char** argv) {
  for (char** arg = argv + 1; *arg; ++arg) {
    const std::string_view a = *arg;
    if (a == kCpuIsaFlag && arg[1]) return cpu::parse_isa(arg[1]);
    if (a.size() > kCpuIsaFlag.size() && a.substr(0, kCpuIsaFlag.size()) == kCpuIsaFlag && a[kCpuIsaFlag.size()] == '=')
      return cpu::parse_isa(a.substr(kCpuIsaFlag.size() + 1));
  }
  return std::nullopt;
}

void add_matmul_flags(CLI::App& cmd, cpu::MatmulOptions& matmul) {
  cmd.add_flag("--int8-activations", matmul.int8_activations,
               "CPU: round activations to int8 for quantized weights at every batch size (faster prompts, ~0.2% "
               "perplexity)");
  cmd.add_flag("--bf16-activations,!--f32-activations", matmul.bf16_activations,
               "CPU: activations rounded to bf16 where the CPU's bf16 products take the weights (the default, as "
               "PyTorch and GPU engines run them): BF16 weights with AVX-512 BF16, and with AMX tiles batches of F16 "
               "(exact) and quantized weights (rounded to bf16) too; --f32-activations keeps them f32");
  cmd.add_flag("--int8-batches,!--no-int8-batches", matmul.int8_batches,
               "CPU without AMX tiles: products of quantized weights over many rows (prompts of 32 tokens, decode "
               "steps of 8 sequences and more) round activations to one int8 digit per 32 where two would take twice "
               "the time: llama.cpp's precision (the default; steps that score a prompt, as perplexity and echoed "
               "logprobs do, keep two digits)");
  cmd.add_flag("--batch-invariant", matmul.batch_invariant,
               "CPU: one arithmetic at every batch size, so a sequence's logits never depend on its batch");
}

void add_kv_cache_dtype_flag(CLI::App& cmd, DType& dtype) {
  cmd.add_option_function<std::string>(
         "--kv-cache-dtype", [&dtype](const std::string& name) { dtype = name == "f16" ? DType::F16 : DType::F32; },
         "CPU: what the KV cache stores: auto or f32 (the activations as computed, the default), or f16 (half the "
         "memory, so twice the tokens, and half the bytes decode attention reads; llama.cpp's default); CUDA stages "
         "keep the model's compute dtype")
      ->check(CLI::IsMember({"auto", "f32", "f16"}));
}

std::string select_cpu_kernels(const std::string& isa) {
  if (isa.empty())
    cpu::kernels();
  else
    cpu::use_isa(*cpu::parse_isa(isa));
  const cpu::BlasCore& blas = cpu::blas_core();
  const cpu::Isa level = cpu::kernels().isa;
  const char* suited = blas.suited(level);
  return "CPU " + cpu::cpu_model_name() + ", kernels " + cpu::isa_name(level) + ", OpenBLAS " + blas.name +
         (suited ? std::string(" (not the ") + cpu::isa_name(level) + " level's: sgemm unused; OPENBLAS_CORETYPE=" + suited +
                       " fixes it)"
                 : "");
}

std::string quantized_arithmetic(const cpu::MatmulOptions& o) {
  if (!cpu::has_matmul_q16()) return "quantized weights on f32";  // the level has no integer path
  const int64_t one_digit_from = cpu::one_digit_from_rows(o);
  if (one_digit_from == 1) return "quantized weights on one int8 digit";
  std::string line = "quantized weights on two int8 digits";
  if (const int64_t tiles_from = cpu::tiles_from_rows(o, DType::Q4_K); tiles_from > 0)
    line += ", bf16 AMX tiles from " + std::to_string(tiles_from) + " rows";
  if (one_digit_from > 1)
    line += ", one digit from " + std::to_string(one_digit_from) + " rows (prompts: " +
            std::to_string(CpuBackend::kPromptOneDigitRows) + "; not in scoring steps)";
  return line;
}

}  // namespace orzo::cli
