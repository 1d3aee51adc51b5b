#pragma once
// `orzo generate`: one completion of a prompt, streamed to stdout as it is produced, with a
// timing summary on stderr. It runs through the actor runtime like every other request.
namespace CLI {
class App;
}

namespace orzo::cli {

void add_generate_command(CLI::App& app);

}  // namespace orzo::cli
