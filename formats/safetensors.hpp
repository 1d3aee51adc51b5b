#pragma once
// Reader for HF safetensors: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data,
// offsets relative to its start. Every field is checked against the file before a view is
// made, so a damaged or hostile file fails with a LoadError, never a wild read.
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.hpp"
#include "core/tensor.hpp"

namespace orzo {

struct SafetensorsFile {
  std::shared_ptr<const MappedFile> file;  // keeps the tensors' bytes alive
  std::vector<TensorView> tensors;         // in data order; names as stored
};

SafetensorsFile read_safetensors(const std::string& path);

// Parses bytes already mapped or in memory (see MappedFile::from_bytes).
SafetensorsFile read_safetensors(std::shared_ptr<const MappedFile> file);

// An HF model directory: model.safetensors, or every shard that
// model.safetensors.index.json's weight_map names (each tensor must be in its shard).
std::vector<SafetensorsFile> read_safetensors_dir(const std::string& dir);

}  // namespace orzo
