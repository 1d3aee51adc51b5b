#pragma once
// `orzo perplexity`: how well a model predicts a text, scored through the actor runtime in
// windows (runtime/perplexity_windows.hpp), with a progress bar on a terminal.
namespace CLI {
class App;
}

namespace orzo::cli {

void add_perplexity_command(CLI::App& app);

}  // namespace orzo::cli
