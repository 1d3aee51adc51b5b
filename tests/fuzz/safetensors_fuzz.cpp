// libFuzzer entry point for the safetensors reader: every input must parse or throw
// LoadError, and whatever parses must describe bytes inside the input.
#include <cstddef>
#include <cstdint>

#include "core/load_error.hpp"
#include "formats/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  orzo::SafetensorsFile f;
  try {
    f = orzo::read_safetensors(orzo::MappedFile::from_bytes("fuzz-input", data, size));
  } catch (const orzo::LoadError&) {
    return 0;
  }
  const uint8_t* begin = f.file->data();
  const uint8_t* end = begin + f.file->size();
  const uint8_t* previous_end = begin;
  for (const auto& t : f.tensors) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    if (p < begin || t.nbytes > static_cast<size_t>(end - p)) __builtin_trap();
    if (t.nbytes == 0) continue;
    if (p < previous_end) __builtin_trap();  // tensors come in data order and never overlap
    previous_end = p + t.nbytes;
    if (t.nbytes != static_cast<size_t>(t.numel()) * orzo::dtype_row_bytes(t.dtype, 1)) __builtin_trap();
    if (t.row(t.rows()) != previous_end) __builtin_trap();
  }
  return 0;
}
