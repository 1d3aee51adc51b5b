#include "cli/generate_command.hpp"

#include "actors/engine.hpp"
#include "actors/system_config.hpp"
#include "cli/engine_flags.hpp"
#include "cli/stream_to_stdout.hpp"
#include "core/read_file.hpp"

#include <CLI/CLI.hpp>
#include <caf/all.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>

namespace orzo::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct GenerateFlags {
  EngineFlags engine;
  std::string prompt = "Once upon a time";
  std::string prompt_file;
  bool no_special = false;
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A prompt file as llama.cpp's -f reads it: the whole text but the newline an editor ends it with.
std::string prompt_from_file(const std::string& path) {
  std::string text = read_file(path);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

int run_generate(GenerateFlags& flags) {
  if (!flags.prompt_file.empty()) flags.prompt = prompt_from_file(flags.prompt_file);
  caf::actor_system_config cfg;
  configure_actor_system(cfg, flags.engine.process_threads());
  caf::actor_system sys{cfg};
  auto engine = Engine::start(sys, flags.engine.engine_options());

  auto request = flags.engine.session_request("generate", *engine);
  request.prompt_ids = engine->tokenize(flags.prompt, !flags.no_special);

  const auto start = Clock::now();
  Clock::time_point first{};
  const Completion c = stream_to_stdout(*engine, std::move(request), [&](const TextChunk& chunk) {
    if (first == Clock::time_point{} && !chunk.tokens.empty()) first = Clock::now();
  });
  const auto end = Clock::now();
  engine->shutdown();
  if (c.reason == FinishReason::error) return 1;
  const auto& u = c.usage;
  const double prefill = first == Clock::time_point{} ? seconds(end - start) : seconds(first - start);
  const double decode = first == Clock::time_point{} ? 0.0 : seconds(end - first);
  std::fprintf(stderr, "orzo: prompt %d tokens in %.1f ms (%.1f tokens/s); generated %d tokens in %.1f ms (%.1f tokens/s); finish: %s\n",
               u.prompt_tokens, prefill * 1e3, prefill > 0 ? u.prompt_tokens / prefill : 0.0, u.generated_tokens,
               decode * 1e3, decode > 0 && u.generated_tokens > 1 ? (u.generated_tokens - 1) / decode : 0.0,
               to_string(c.reason));
  std::fprintf(stderr, "orzo: %s\n", kv_pool_text(engine->kv_pool()).c_str());
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  auto* cmd = app.add_subcommand("generate", "Complete a prompt, streaming the text to stdout");
  flags->engine.add_to(*cmd);
  auto* prompt = cmd->add_option("-p,--prompt", flags->prompt, "Prompt text")->capture_default_str();
  cmd->add_option("-f,--file", flags->prompt_file,
                  "Prompt read from a file (UTF-8; a newline that ends the file is dropped, as llama.cpp's -f does)")
      ->excludes(prompt);
  cmd->add_flag("--no-special", flags->no_special, "Do not add BOS or other special tokens to the prompt");
  cmd->callback([flags] {
    if (const int rc = run_generate(*flags); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace orzo::cli
