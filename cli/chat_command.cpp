#include "cli/chat_command.hpp"

#include "actors/engine.hpp"
#include "actors/system_config.hpp"
#include "chat_template/chat_template.hpp"
#include "cli/engine_flags.hpp"
#include "cli/stream_to_stdout.hpp"
#include "text/tokenizer/tokenizer.hpp"

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace orzo::cli {
namespace {

struct ChatFlags {
  EngineFlags engine;
  std::string system;
  std::string prompt;
  bool one_shot = false;  // -p given: one turn with `prompt`, nothing read from stdin
};

// One assistant turn: streams the reply to stdout and returns it (none on error).
std::optional<std::string> reply(Engine& engine, const EngineFlags& flags, const std::string& prompt, int turn) {
  auto request = flags.session_request("chat-" + std::to_string(turn), engine);
  request.prompt_ids = engine.tokenize(prompt, false);  // the template wrote BOS and every marker itself
  std::string text;
  const Completion c =
      stream_to_stdout(engine, std::move(request), [&](const TextChunk& chunk) { text += chunk.text; });
  if (c.reason == FinishReason::error) return std::nullopt;
  return text;
}

int run_chat(ChatFlags& flags) {
  if (flags.one_shot && flags.prompt.empty()) throw std::runtime_error("--prompt: the message is empty");
  caf::actor_system_config cfg;
  configure_actor_system(cfg, flags.engine.process_threads());
  caf::actor_system sys{cfg};
  auto engine = Engine::start(sys, flags.engine.engine_options());
  const auto& tokenizer = *engine->tokenizer();
  if (tokenizer.chat_template().empty()) {
    engine->shutdown();
    throw std::runtime_error("this model has no chat template; use `orzo generate` for a base model");
  }
  const ChatTemplate tmpl(tokenizer.chat_template());
  nlohmann::json messages = nlohmann::json::array();
  if (!flags.system.empty()) messages.push_back({{"role", "system"}, {"content", flags.system}});
  const auto ask = [&](const std::string& message, int turn) {
    messages.push_back({{"role", "user"}, {"content", message}});
    const std::string prompt =
        apply_chat_template(tmpl, messages, true, tokenizer.bos_token(), tokenizer.eos_token());
    auto answer = reply(*engine, flags.engine, prompt, turn);
    messages.push_back({{"role", "assistant"}, {"content", answer.value_or("")}});
    return answer.has_value();
  };
  if (flags.one_shot) {
    // A script asks one question and needs to know whether it got an answer.
    const bool answered = ask(flags.prompt, 0);
    engine->shutdown();
    return answered ? 0 : 1;
  }
  std::fprintf(stderr, "orzo chat: type a message; /reset starts over, /exit or end of input quits\n");
  std::string line;
  for (int turn = 0;; ++turn) {
    std::fputs("> ", stderr);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      messages.erase(messages.begin() + (flags.system.empty() ? 0 : 1), messages.end());
      continue;
    }
    ask(line, turn);
  }
  engine->shutdown();
  return 0;
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto flags = std::make_shared<ChatFlags>();
  auto* cmd = app.add_subcommand("chat", "Chat with a model through its chat template");
  flags->engine.add_to(*cmd);
  cmd->add_option("--system", flags->system, "System prompt");
  auto* prompt =
      cmd->add_option("-p,--prompt", flags->prompt, "Send this one message, print the reply and exit (no stdin)");
  cmd->callback([flags, prompt] {
    flags->one_shot = prompt->count() > 0;
    if (const int rc = run_chat(*flags); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace orzo::cli
