#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator of Random123, cuRAND and PyTorch. Its output is a pure function of
// (key, counter), with no state to carry between draws, so a CUDA sampler can reproduce the
// CPU sampler's draws exactly: both hash (seed, step) with the same function.
#include <array>
#include <cstdint>

namespace orzo {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

namespace philox_detail {

// Round multipliers and Weyl key increments (golden ratio and sqrt(3) - 1), as published.
constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;
constexpr uint32_t kW1 = 0xBB67AE85u;

constexpr PhiloxCounter round(const PhiloxCounter& c, const PhiloxKey& k) {
  const uint64_t p0 = uint64_t{kM0} * c[0];
  const uint64_t p1 = uint64_t{kM1} * c[2];
  return {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
          static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
}

}  // namespace philox_detail

// Ten rounds, the key bumped between consecutive rounds (nine bumps), exactly as Random123's
// philox4x32_R(10, ...): the published known-answer vectors hold for this function.
constexpr PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  counter = philox_detail::round(counter, key);
  for (int r = 1; r < 10; ++r) {
    key[0] += philox_detail::kW0;
    key[1] += philox_detail::kW1;
    counter = philox_detail::round(counter, key);
  }
  return counter;
}

// The top 24 bits, because a float carries exactly 24 significant bits: every result is a
// multiple of 2^-24, representable exactly, and the two ranges never round onto their open end.
constexpr float unit_float_closed_open(uint32_t bits) {  // [0, 1)
  return static_cast<float>(bits >> 8) * 0x1p-24f;
}
constexpr float unit_float_open_closed(uint32_t bits) {  // (0, 1]
  return static_cast<float>((bits >> 8) + 1u) * 0x1p-24f;
}

// The sampling draw convention, shared by every sampler implementation: the seed is the key
// (low word first), the request's step index fills counter words 0 and 1 (low word first), and
// output word 0 becomes the uniform. Counter words 2 and 3 stay zero, free for future draws of
// the same step.
constexpr float philox_uniform(uint64_t seed, uint64_t step) {
  const PhiloxKey key{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  const PhiloxCounter counter{static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), 0, 0};
  return unit_float_closed_open(philox4x32_10(counter, key)[0]);
}

}  // namespace orzo
