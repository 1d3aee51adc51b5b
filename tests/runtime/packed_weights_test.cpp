#include "runtime/packed_weights.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/packed_rows.hpp"

namespace orzo {
namespace {

// `rows` rows of `cols` Q4_K weights, random bytes.
std::vector<uint8_t> q4_k_rows(int64_t rows, int64_t cols) {
  std::vector<uint8_t> bytes(static_cast<size_t>(rows) * dtype_row_bytes(DType::Q4_K, cols));
  std::mt19937 rng(4);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

// Three threads: a slice's groups split unevenly between them.
ThreadPool& pool() {
  static ThreadPool threads(3);
  return threads;
}

TensorView view_of(const std::vector<uint8_t>& bytes, DType t, int64_t rows, int64_t cols) {
  return TensorView{"test.weight", "", t, {rows, cols}, bytes.data(), bytes.size()};
}

TEST(PackedWeights, EveryHolderOfAMatrixSharesOneCopyMadeOnce) {
  const auto bytes = q4_k_rows(32, 512);
  TensorView a = view_of(bytes, DType::Q4_K, 32, 512), b = a;
  const PackedMatrix first = use_packed_rows(a, pool()), second = use_packed_rows(b, pool());
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first, second);
  EXPECT_EQ(a.packed, first->data());
  EXPECT_EQ(b.packed, first->data());
  std::vector<uint8_t> expected(cpu::packed_rows_bytes(a));
  cpu::pack_rows(a, expected.data());
  EXPECT_EQ(std::vector<uint8_t>(first->data(), first->data() + first->size()), expected);
  // The matrix's first 16 rows start where it does, and are a matrix of their own.
  TensorView part = view_of(bytes, DType::Q4_K, 32, 512).row_range(0, 16);
  const PackedMatrix of_part = use_packed_rows(part, pool());
  ASSERT_NE(of_part, nullptr);
  EXPECT_NE(of_part, first);
  EXPECT_EQ(of_part->size(), first->size() / 2);
}

TEST(PackedWeights, ACopyNoOneHoldsIsMadeAgain) {
  const auto bytes = q4_k_rows(16, 256);
  TensorView a = view_of(bytes, DType::Q4_K, 16, 256);
  std::weak_ptr<const PageMemory> gone = use_packed_rows(a, pool());
  EXPECT_TRUE(gone.expired());
  TensorView b = view_of(bytes, DType::Q4_K, 16, 256);
  const PackedMatrix again = use_packed_rows(b, pool());
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(b.packed, again->data());
}

TEST(PackedWeights, RowsThatDoNotPackAreLeftAsStored) {
  const auto q4 = q4_k_rows(20, 256);  // not whole groups of 16
  TensorView ragged = view_of(q4, DType::Q4_K, 20, 256);
  EXPECT_EQ(use_packed_rows(ragged, pool()), nullptr);
  EXPECT_EQ(ragged.packed, nullptr);
  std::vector<uint8_t> q8(16 * dtype_row_bytes(DType::Q8_0, 256));
  TensorView other = view_of(q8, DType::Q8_0, 16, 256);
  EXPECT_EQ(use_packed_rows(other, pool()), nullptr);
  EXPECT_EQ(other.packed, nullptr);
}

// A matrix larger than a slice (4 MiB of stored rows) is packed slice by slice, its pages
// handed back after each, each slice by the pool's threads: the copy is the one packed
// whole, the stored bytes unchanged.
TEST(PackedWeights, SlicesPackAsTheWholeMatrix) {
  const int64_t rows = 4000, cols = 2048;  // 1,152-byte rows: slices of 3,632 rows
  auto bytes = q4_k_rows(rows, cols);
  const std::vector<uint8_t> before = bytes;
  TensorView v = view_of(bytes, DType::Q4_K, rows, cols);
  std::vector<uint8_t> whole(cpu::packed_rows_bytes(v));
  cpu::pack_rows(v, whole.data());
  const PackedMatrix packed = use_packed_rows(v, pool());
  ASSERT_NE(packed, nullptr);
  ASSERT_EQ(packed->size(), whole.size());
  EXPECT_TRUE(std::equal(whole.begin(), whole.end(), packed->data()));
  EXPECT_TRUE(bytes == before);
}

// Handing the pages back never changes the bytes: a later read brings them back.
TEST(PackedWeights, ReleasedRowsReadAsBefore) {
  auto bytes = q4_k_rows(64, 2048);
  const std::vector<uint8_t> before = bytes;
  TensorView v = view_of(bytes, DType::Q4_K, 64, 2048);
  const PackedMatrix packed = use_packed_rows(v, pool());
  ASSERT_NE(packed, nullptr);
  EXPECT_EQ(bytes, before);
}

}  // namespace
}  // namespace orzo
