#include "cli/quantize_command.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "formats/gguf_quant_recipe.hpp"
#include "runtime/quantize_model.hpp"
#include "text/tokenizer/hf_tokenizer_gguf.hpp"

namespace orzo::cli {
namespace {

struct QuantizeFlags {
  std::string in, out, type;
  int threads = 0;
};

std::string target_list() {
  std::string s;
  for (const auto& n : quant_target_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// On a terminal, one bar redrawn in place; elsewhere (a log) one line per tensor.
void report(const QuantizeProgress& p, bool tty) {
  const double mib = static_cast<double>(p.bytes_done) / (1 << 20), total = static_cast<double>(p.bytes_total) / (1 << 20);
  if (!tty) {
    std::fprintf(stderr, "[%zu/%zu] %s -> %s\n", p.tensor, p.tensors, p.name.c_str(), dtype_name(p.type));
    return;
  }
  constexpr int width = 30;
  const int filled = static_cast<int>(p.tensor * width / p.tensors);
  std::fprintf(stderr, "\rquantizing [%s%s] %zu/%zu tensors %.1f/%.1f MiB\x1b[K", std::string(filled, '#').c_str(),
               std::string(width - filled, ' ').c_str(), p.tensor, p.tensors, mib, total);
  if (p.tensor == p.tensors) std::fputc('\n', stderr);
}

int run_quantize(const QuantizeFlags& f) {
  const auto target = parse_quant_target(f.type);
  if (!target) throw std::invalid_argument("unknown type '" + f.type + "' (one of " + target_list() + ")");
  if (!std::filesystem::exists(f.in)) throw std::invalid_argument(f.in + ": no such file or directory");
  // Written under a temporary name and renamed once complete, so OUT is never a partial file.
  const std::string tmp = f.out + ".tmp";
  QuantizeOptions options;
  options.threads = f.threads;
  options.on_tensor = [tty = isatty(STDERR_FILENO) == 1](const QuantizeProgress& p) { report(p, tty); };
  options.hf_tokenizer = [](GgufWriter& out, const std::string& dir) {
    const std::string why = write_hf_tokenizer_gguf(out, dir);
    if (!why.empty()) std::fprintf(stderr, "orzo: note: %s: tokenizer not written (%s)\n", dir.c_str(), why.c_str());
  };
  try {
    quantize_model(f.in, tmp, *target, options);
    std::filesystem::rename(tmp, f.out);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
  std::fprintf(stderr, "orzo: wrote %s (%s, %.1f MiB)\n", f.out.c_str(), target->name.c_str(),
               static_cast<double>(std::filesystem::file_size(f.out)) / (1 << 20));
  return 0;
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto flags = std::make_shared<QuantizeFlags>();
  auto* cmd = app.add_subcommand("quantize", "Re-encode an HF directory or GGUF file as a GGUF file of another type");
  cmd->add_option("in", flags->in, "HF model directory or .gguf file")->required();
  cmd->add_option("out", flags->out, "Output .gguf file")->required();
  cmd->add_option("type", flags->type, "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, "
                                       "iq4_nl, iq4_xs, or a mix: Q3_K_M, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, Q8_0")
      ->required();
  cmd->add_option("-t,--threads", flags->threads, "Threads (0: one per hardware thread)")->capture_default_str();
  cmd->callback([flags] {
    if (const int rc = run_quantize(*flags); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace orzo::cli
