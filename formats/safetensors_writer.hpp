#pragma once
// Streaming safetensors writer: declare every tensor (and any __metadata__), then write
// each tensor's bytes in declaration order, in as many pieces as the caller likes. Only
// the JSON header is held in memory. Misuse throws std::logic_error; I/O failures
// std::runtime_error.
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.hpp"

namespace orzo {

class SafetensorsWriter {
 public:
  // Creates (truncates) `path` now, so a bad path fails before any work is done.
  explicit SafetensorsWriter(std::string path);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  void add_metadata(const std::string& key, const std::string& value);

  // F32, F16 or BF16; shape outermost first.
  void add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape);

  // The next nbytes of the current tensor; a call may not run past the end of that tensor.
  void write_tensor_data(const void* data, size_t nbytes);

  // Checks that every tensor was written in full, then flushes and closes the file.
  void finish();

 private:
  void write_header();
  void write_bytes(const void* p, size_t n);

  std::string path_;
  std::FILE* out_ = nullptr;
  nlohmann::ordered_json header_ = nlohmann::ordered_json::object();
  std::set<std::string> names_;
  std::vector<uint64_t> tensor_bytes_;
  uint64_t next_offset_ = 0;
  bool header_written_ = false;
  size_t current_ = 0;
  uint64_t current_written_ = 0;
};

}  // namespace orzo
