#pragma once
// `orzo chat`: an interactive, multi-turn conversation rendered with the model's own chat
// template, each reply streamed as it is produced.
namespace CLI {
class App;
}

namespace orzo::cli {

void add_chat_command(CLI::App& app);

}  // namespace orzo::cli
