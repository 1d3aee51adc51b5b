// dequantize_gguf IN.gguf OUT.gguf: every tensor of IN decoded to f32 by orzo's reference
// dequantizer (cpu::dequantize_row), written under its own name and shape to OUT, so that
// tests/formats/test_dequantize_reference.py can hold each value to gguf.quants' bits.
#include <cstdio>
#include <exception>
#include <vector>

#include "formats/gguf.hpp"
#include "formats/gguf_writer.hpp"
#include "kernels/cpu/convert.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: dequantize_gguf IN.gguf OUT.gguf\n");
    return 2;
  }
  try {
    const orzo::GgufFile in = orzo::read_gguf(argv[1]);
    orzo::GgufWriter out(argv[2]);
    for (const auto& t : in.tensors) out.add_tensor(t.name, orzo::DType::F32, t.shape);
    std::vector<float> row;
    for (const auto& t : in.tensors) {
      row.resize(static_cast<size_t>(t.cols()));
      for (int64_t r = 0; r < t.rows(); ++r) {
        orzo::cpu::dequantize_row(t.dtype, t.row(r), t.cols(), row.data());
        out.write_tensor_data(row.data(), row.size() * sizeof(float));
      }
    }
    out.finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dequantize_gguf: %s\n", e.what());
    return 1;
  }
  return 0;
}
