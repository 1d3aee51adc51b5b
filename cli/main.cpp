// The orzo command line: one binary, one subcommand per job.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "cli/bench_command.hpp"
#include "cli/chat_command.hpp"
#include "cli/cpu_kernels_flag.hpp"
#include "cli/generate_command.hpp"
#include "cli/info_command.hpp"
#include "cli/perplexity_command.hpp"
#include "cli/quantize_command.hpp"
#include "cli/serve_command.hpp"
#include "cli/worker_command.hpp"
#include "kernels/cpu/matmul_blas.hpp"

int main(int argc, char** argv) {
  orzo::cpu::rerun_with_suited_blas(argv, orzo::cli::cpu_isa_in(argv));
  orzo::cpu::stop_blas_server_threads();
  CLI::App app{"orzo: an LLM inference runtime where every moving part is an actor"};
  orzo::cli::add_generate_command(app);
  orzo::cli::add_chat_command(app);
  orzo::cli::add_bench_command(app);
  orzo::cli::add_serve_command(app);
  orzo::cli::add_worker_command(app);
  orzo::cli::add_quantize_command(app);
  orzo::cli::add_info_command(app);
  orzo::cli::add_perplexity_command(app);
  try {
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) {
      std::fprintf(stderr, "%s", app.help().c_str());
      return 2;
    }
  } catch (const CLI::ParseError& e) {
    // --help prints and succeeds; a command's own failure (RuntimeError) has said why already;
    // a bad flag is one line, like every other error.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success) || e.get_name() == "RuntimeError")
      return app.exit(e);
    std::fprintf(stderr, "orzo: error: %s\n", e.what());
    return e.get_exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "orzo: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
