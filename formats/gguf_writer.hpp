#pragma once
// Streaming GGUF v3 writer: metadata and tensor infos first, then each tensor's bytes in
// the order the tensors were added, in as many pieces as the caller likes. Only the header
// is held in memory, so a multi-gigabyte model is written with a bounded footprint.
// Misuse (wrong order, wrong sizes) throws std::logic_error; I/O failures std::runtime_error.
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "formats/gguf.hpp"

namespace orzo {

class GgufWriter {
 public:
  // Creates (truncates) `path` now, so a bad path fails before any work is done.
  // An alignment other than the default is recorded as general.alignment.
  explicit GgufWriter(std::string path, uint32_t alignment = kGgufDefaultAlignment);
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  void add_u8(const std::string& key, uint8_t v);
  void add_i8(const std::string& key, int8_t v);
  void add_u16(const std::string& key, uint16_t v);
  void add_i16(const std::string& key, int16_t v);
  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_u64(const std::string& key, uint64_t v);
  void add_i64(const std::string& key, int64_t v);
  void add_f32(const std::string& key, float v);
  void add_f64(const std::string& key, double v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_string_array(const std::string& key, const std::vector<std::string>& v);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void add_f32_array(const std::string& key, const std::vector<float>& v);
  // A value copied from another file as GgufMetadata::raw returns it.
  void add_raw(const std::string& key, const GgufRawValue& v);

  // shape is outermost first, as in TensorView; quantized rows need shape.back() % 32 == 0.
  void add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape);

  // The next nbytes of the current tensor; a call may not run past the end of that tensor.
  void write_tensor_data(const void* data, size_t nbytes);

  // Checks that every tensor was written in full, then flushes and closes the file.
  void finish();

 private:
  void begin_value(const std::string& key, GgufType type);
  void put_raw(const void* p, size_t n) { header_.append(static_cast<const char*>(p), n); }
  void put_u32(uint32_t v) { put_raw(&v, sizeof v); }
  void put_u64(uint64_t v) { put_raw(&v, sizeof v); }
  void put_string(const std::string& s);
  void write_header();
  void write_bytes(const void* p, size_t n);
  void pad_to_alignment(uint64_t written);

  std::string path_;
  uint32_t alignment_;
  std::FILE* out_ = nullptr;
  std::string header_;          // key/value section, then (once data starts) the rest of the header
  std::string tensor_infos_;
  uint64_t kv_count_ = 0;
  std::set<std::string> keys_, tensor_names_;
  std::vector<uint64_t> tensor_bytes_;
  uint64_t next_offset_ = 0;    // where the next added tensor's data will start
  bool header_written_ = false;
  size_t current_ = 0;          // the tensor now being written
  uint64_t current_written_ = 0;
};

}  // namespace orzo
