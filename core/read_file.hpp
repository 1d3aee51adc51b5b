#pragma once
// The whole of a small file (tokenizer.json, a SentencePiece model, a chat template) as
// bytes. Weights are mapped instead (core/mapped_file.hpp).
#include <string>

namespace orzo {

// Throws LoadError ("PATH: cannot open") when the file cannot be read.
std::string read_file(const std::string& path);

}  // namespace orzo
