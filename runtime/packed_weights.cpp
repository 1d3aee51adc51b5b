#include "runtime/packed_weights.hpp"

#include <map>
#include <mutex>
#include <tuple>

#include "core/mapped_file.hpp"
#include "kernels/cpu/packed_rows.hpp"

namespace orzo {

PackedMatrix use_packed_rows(TensorView& w, bool stored_rows_read) {
  if (!cpu::packs_rows(w)) return nullptr;
  // Keyed by the stored rows' address and shape (the first rows of a fused matrix start
  // where it does): while a copy lives its holder keeps the model, and so the rows, where
  // they are; an expired entry is packed again.
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int64_t, int64_t>, std::weak_ptr<const std::vector<uint8_t>>> copies;
  const std::lock_guard<std::mutex> lock(mutex);
  std::weak_ptr<const std::vector<uint8_t>>& entry = copies[{w.data, w.rows(), w.cols()}];
  PackedMatrix packed = entry.lock();
  if (!packed) {
    auto bytes = std::make_shared<std::vector<uint8_t>>(cpu::packed_rows_bytes(w));
    cpu::pack_rows(w, bytes->data());
    packed = std::move(bytes);
    entry = packed;
    if (!stored_rows_read) release_pages(w.data, w.nbytes);
  }
  w.packed = packed->data();
  return packed;
}

}  // namespace orzo
