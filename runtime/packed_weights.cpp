#include "runtime/packed_weights.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "core/mapped_file.hpp"
#include "kernels/cpu/packed_rows.hpp"

namespace orzo {

PackedMatrix use_packed_rows(TensorView& w, ThreadPool& pool) {
  if (!cpu::packs_rows(w)) return nullptr;
  // Keyed by the stored rows' address and shape (the first rows of a fused matrix start
  // where it does): while a copy lives its holder keeps the model, and so the rows, where
  // they are; an expired entry is packed again.
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int64_t, int64_t>, std::weak_ptr<const PageMemory>> copies;
  const std::lock_guard<std::mutex> lock(mutex);
  std::weak_ptr<const PageMemory>& entry = copies[{w.data, w.rows(), w.cols()}];
  PackedMatrix packed = entry.lock();
  if (!packed) {
    auto bytes = std::make_shared<PageMemory>(cpu::packed_rows_bytes(w));
    // Slice by slice, each slice's stored pages handed back as soon as it is packed, so that
    // the load holds one slice twice, not a whole matrix (a tied embedding of a 128k
    // vocabulary is hundreds of MB). A page that straddles two slices stays.
    const auto row_bytes = static_cast<int64_t>(dtype_row_bytes(w.dtype, w.cols()));
    const int64_t slice = std::max<int64_t>(1, (int64_t{4} << 20) / row_bytes / cpu::kPackedRows) * cpu::kPackedRows;
    // The rows are whole groups (packs_rows), each packed to the same bytes, so the pool's
    // threads take a slice's groups a few at a time; as they come, since the stored pages
    // they fault in cost one thread more than another.
    const size_t group_bytes = bytes->size() / static_cast<size_t>(w.rows() / cpu::kPackedRows);
    for (int64_t first = 0; first < w.rows(); first += slice) {
      const TensorView rows = w.row_range(first, std::min(slice, w.rows() - first));
      pool.parallel_for_dynamic(rows.rows() / cpu::kPackedRows, [&](int64_t begin, int64_t end, int) {
        cpu::pack_rows(rows.row_range(begin * cpu::kPackedRows, (end - begin) * cpu::kPackedRows),
                       bytes->data() + static_cast<size_t>(first / cpu::kPackedRows + begin) * group_bytes);
      }, 8);
      release_pages(rows.data, rows.nbytes);
    }
    packed = std::move(bytes);
    entry = packed;
  }
  w.packed = packed->data();
  return packed;
}

}  // namespace orzo
