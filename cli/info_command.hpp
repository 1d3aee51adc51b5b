#pragma once
// `orzo info MODEL`: what a GGUF file or HF directory holds (architecture and shape, the mix
// of tensor types, the tokenizer), as text or one JSON object, without reading the weights.
namespace CLI {
class App;
}

namespace orzo::cli {

void add_info_command(CLI::App& app);

}  // namespace orzo::cli
