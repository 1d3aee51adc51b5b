#pragma once
// Reader for GGUF v2/v3 (llama.cpp's format): header, typed key/value metadata, tensor
// infos, then aligned tensor data. Every count and length is checked against the bytes
// that remain before anything is allocated, so a corrupt file fails with a LoadError
// instead of a crash or a huge allocation.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "core/mapped_file.hpp"
#include "core/tensor.hpp"

namespace orzo {

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};

inline constexpr uint32_t kGgufDefaultAlignment = 32;

// GGML's numbering of tensor element types, as stored in a GGUF tensor info.
uint32_t ggml_type_of(DType t);
std::optional<DType> dtype_from_ggml(uint32_t ggml_type);

// The key/value section. Values stay in the mapped file and are decoded on request, which
// keeps opening a model with a 150k-token vocabulary cheap. Getters accept every stored
// type that converts without loss of meaning (any integer width for get_int, integers and
// floats for get_float) and throw LoadError naming the file and key otherwise.
// One value exactly as the file encodes it after its type tag (an array: element type,
// count, elements), for copying a key to another file without decoding it.
struct GgufRawValue {
  GgufType type;
  std::string_view bytes;
};

class GgufMetadata {
 public:
  GgufMetadata() = default;

  // Reads `count` key/value pairs starting at byte `pos` of `file`, validating each;
  // on return `pos` is just past them.
  static GgufMetadata parse(std::shared_ptr<const MappedFile> file, size_t& pos, uint64_t count);

  bool has(const std::string& key) const { return entries_.count(key) != 0; }
  std::vector<std::string> keys() const;  // sorted

  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;
  std::vector<double> get_float_array(const std::string& key) const;

  // nullopt when the key is absent; a present key of the wrong type still throws.
  std::optional<int64_t> find_int(const std::string& key) const;
  std::optional<double> find_float(const std::string& key) const;
  std::optional<std::string> find_string(const std::string& key) const;

  GgufRawValue raw(const std::string& key) const;

 private:
  struct Entry {
    GgufType type;
    GgufType elem_type;  // arrays only
    uint64_t count;      // arrays only
    size_t offset;       // the value itself, or an array's first element
    size_t end;          // just past the value
  };
  const Entry& entry(const std::string& key) const;
  [[noreturn]] void wrong_type(const std::string& key, const char* wanted) const;

  std::shared_ptr<const MappedFile> file_;
  std::map<std::string, Entry, std::less<>> entries_;
};

struct GgufFile {
  std::shared_ptr<const MappedFile> file;  // keeps the tensors' bytes alive
  uint32_t version = 0;
  GgufMetadata metadata;
  std::vector<TensorView> tensors;  // in file order; names as stored, shapes outermost first
};

GgufFile read_gguf(const std::string& path);

// Parses bytes already mapped or in memory (see MappedFile::from_bytes).
GgufFile read_gguf(std::shared_ptr<const MappedFile> file);

}  // namespace orzo
