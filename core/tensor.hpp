#pragma once
// A read-only view of one stored weight tensor: its bytes stay in the mapped file.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace orzo {

struct TensorView {
  std::string name;            // canonical (HF) name, e.g. model.layers.0.self_attn.q_proj.weight
  std::string file;            // the file it was read from, for error messages
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // outermost first, as in PyTorch: a Linear weight is [out, in]
  const void* data = nullptr;
  size_t nbytes = 0;
  // The same matrix regrouped for the active CPU level's gemv (kernels/cpu/packed_rows.hpp),
  // where a backend made that copy; null elsewhere. Kernels that do not read it read `data`.
  const void* packed = nullptr;

  int64_t numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  int64_t rows() const {
    int64_t n = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) n *= shape[i];
    return n;
  }
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * dtype_row_bytes(dtype, cols());
  }
  // Rows [first, first + count) as a [count, cols] matrix of the same bytes (a fused matrix's
  // part, one expert of a stacked tensor); whole rows, so any dtype's blocks stay whole.
  TensorView row_range(int64_t first, int64_t count) const {
    TensorView v = *this;
    v.shape = {count, cols()};
    v.data = row(first);
    v.nbytes = static_cast<size_t>(count) * dtype_row_bytes(dtype, cols());
    v.packed = nullptr;  // its groups need not start at `first`
    return v;
  }
};

}  // namespace orzo
