// libFuzzer entry point for placement specs: every input must parse or throw
// std::invalid_argument with a one-line message, and whatever parses must tile the model:
// contiguous non-empty stages from layer 0 to the last, on a known device (remote stages
// with index 0); and count_stages, which reads any input without throwing, counts what
// parses as parse_placement does.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "stages/placement.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int32_t layers = data[0] % 70;  // 0 included: must be refused, not crash
  const std::string spec(reinterpret_cast<const char*>(data + 1), size - 1);
  const int32_t counted[] = {orzo::count_stages(spec, 1, "cpu"), orzo::count_stages(spec, 1, "cuda"),
                             orzo::count_stages(spec, 1, "remote")};
  std::vector<orzo::Stage> stages;
  try {
    stages = orzo::parse_placement(spec, layers);
  } catch (const std::invalid_argument& e) {
    if (std::strchr(e.what(), '\n') != nullptr) std::abort();
    return 0;
  }
  int64_t next = 0;
  int32_t on[3] = {0, 0, 0};
  for (const orzo::Stage& s : stages) {
    ++on[s.device == "cpu" ? 0 : s.device == "cuda" ? 1 : 2];
    if (s.device != "cpu" && s.device != "cuda" && s.device != "remote") std::abort();
    if (s.device == "remote" && s.device_index != 0) std::abort();
    if (s.device_index < 0 || s.layers.begin != next || s.layers.end <= s.layers.begin) std::abort();
    next = s.layers.end;
  }
  if (next != layers) std::abort();
  for (int d = 0; d < 3; ++d)
    if (counted[d] != on[d]) std::abort();
  return 0;
}
