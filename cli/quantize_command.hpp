#pragma once
// `orzo quantize IN OUT TYPE`: an HF directory or GGUF file re-encoded as one GGUF file,
// every matrix stored as TYPE or as one of llama.cpp's mixes chooses.
namespace CLI {
class App;
}

namespace orzo::cli {

void add_quantize_command(CLI::App& app);

}  // namespace orzo::cli
