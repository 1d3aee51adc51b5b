// libFuzzer entry point for the GGUF reader: every input must parse or throw LoadError,
// and whatever parses must be safe to use: every metadata getter, every tensor's rows,
// and the decoding of a tensor's first and last rows from whatever bytes they hold.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/load_error.hpp"
#include "formats/gguf.hpp"
#include "kernels/cpu/convert.hpp"

namespace {

template <typename F>
void ignore_load_error(F&& f) {
  try {
    f();
  } catch (const orzo::LoadError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  orzo::GgufFile f;
  try {
    f = orzo::read_gguf(orzo::MappedFile::from_bytes("fuzz-input", data, size));
  } catch (const orzo::LoadError&) {
    return 0;
  }
  const orzo::GgufMetadata& m = f.metadata;
  for (const auto& key : m.keys()) {
    ignore_load_error([&] { m.get_int(key); });
    ignore_load_error([&] { m.get_float(key); });
    ignore_load_error([&] { m.get_bool(key); });
    ignore_load_error([&] { m.get_string(key); });
    ignore_load_error([&] { m.get_string_array(key); });
    ignore_load_error([&] { m.get_int_array(key); });
    ignore_load_error([&] { m.get_float_array(key); });
  }
  // A view must cover exactly its rows, inside the input: the address arithmetic that
  // consumers do with row() has to land on the bytes the reader checked.
  const uint8_t* begin = f.file->data();
  const uint8_t* end = begin + f.file->size();
  for (const auto& t : f.tensors) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    if (p < begin || t.nbytes > static_cast<size_t>(end - p)) __builtin_trap();
    if (t.cols() == 0) continue;
    if (t.row(t.rows()) != p + t.nbytes) __builtin_trap();
    if (t.rows() == 0 || t.cols() > (int64_t{1} << 16)) continue;
    std::vector<float> row(static_cast<size_t>(t.cols()));
    for (const int64_t r : {int64_t{0}, t.rows() - 1}) orzo::cpu::dequantize_row(t.dtype, t.row(r), t.cols(), row.data());
  }
  return 0;
}
