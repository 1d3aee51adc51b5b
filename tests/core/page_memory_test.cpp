// PageMemory: zeros until written, nothing spent until touched, and 2 MiB pages asked for
// wherever a buffer holds one.
#include "core/page_memory.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace orzo {
namespace {

// The value of `field` (e.g. "THPeligible") for the mapping of /proc/self/smaps that holds p;
// empty where there is none.
std::string smaps_field(const void* p, const std::string& field) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-' && line.find(':') > line.find(' ')) {
      inside = begin <= at && at < end;
      continue;
    }
    if (inside && line.rfind(field + ":", 0) == 0) {
      std::string value = line.substr(field.size() + 1);
      value.erase(0, value.find_first_not_of(' '));
      return value;
    }
  }
  return {};
}

bool transparent_huge_pages_offered() {
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text;
  std::getline(mode, text);
  return !text.empty() && text.find("[never]") == std::string::npos;
}

TEST(PageMemory, ReadsAsZerosAndKeepsWhatIsWritten) {
  PageMemory m(5 << 20);
  ASSERT_NE(m.data(), nullptr);
  EXPECT_EQ(m.size(), size_t{5} << 20);
  EXPECT_TRUE(std::all_of(m.data(), m.data() + m.size(), [](uint8_t b) { return b == 0; }));
  m.data()[0] = 1;
  m.data()[m.size() - 1] = 2;

  PageMemory moved(std::move(m));
  EXPECT_EQ(m.data(), nullptr);
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(moved.data()[0], 1);
  EXPECT_EQ(moved.data()[moved.size() - 1], 2);
  PageMemory small(100);
  small = std::move(moved);
  EXPECT_EQ(small.data()[small.size() - 1], 2);

  const PageMemory none(0);
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(none.size(), 0u);
}

TEST(PageMemory, AsksForHugePagesWhereABufferHoldsOne) {
  const PageMemory big(64 << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % (2 << 20), 0u);
  if (!transparent_huge_pages_offered()) GTEST_SKIP() << "this kernel offers no transparent huge pages";
  const std::string eligible = smaps_field(big.data(), "THPeligible");
  if (eligible.empty()) GTEST_SKIP() << "/proc/self/smaps has no THPeligible field here";
  EXPECT_EQ(eligible, "1");
  // Untouched, it costs no memory.
  EXPECT_EQ(smaps_field(big.data(), "Rss"), "0 kB");
}

}  // namespace
}  // namespace orzo
