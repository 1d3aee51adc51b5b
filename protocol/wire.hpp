#pragma once
// Helpers for putting floats on the wire. CAF 0.17 packs float and double with its own
// IEEE-754 routine, which loops forever on ±inf, turns NaN into 1 and garbles denormals
// (fixed only in 0.18). Logprobs are -inf routinely, so every float that may cross a process
// boundary travels as its bit pattern instead.

#include <utility>  // before CAF's load_callback.hpp, which uses std::move without it

#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/none.hpp>
#include <caf/sec.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace orzo {

// A float that serializes as its 32 bits.
struct f32 {
  float v = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, f32& x) {
  uint32_t bits;
  std::memcpy(&bits, &x.v, sizeof bits);
  return f(caf::meta::type_name("f32"), bits, caf::meta::load_callback([&]() -> caf::error {
             std::memcpy(&x.v, &bits, sizeof bits);
             return caf::none;
           }));
}

// A view of a float member of a plain struct that must stay free of CAF (SamplingParams),
// serialized like f32.
struct float_ref {
  float& v;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, float_ref& x) {
  uint32_t bits;
  std::memcpy(&bits, &x.v, sizeof bits);
  return f(bits, caf::meta::load_callback([&]() -> caf::error {
             std::memcpy(&x.v, &bits, sizeof bits);
             return caf::none;
           }));
}

// A float array (hidden states) as one block of bytes: bit-exact, and serialized with a
// single copy instead of an element-by-element loop. Both ends are little-endian x86-64 or
// aarch64, which share the float layout.
struct float_block_ref {
  std::vector<float>& v;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, float_block_ref& x) {
  std::vector<char> bytes;
  if constexpr (Inspector::reads_state) {
    bytes.resize(x.v.size() * sizeof(float));
    if (!bytes.empty()) std::memcpy(bytes.data(), x.v.data(), bytes.size());
  }
  return f(bytes, caf::meta::load_callback([&]() -> caf::error {
             if (bytes.size() % sizeof(float) != 0) return caf::sec::invalid_argument;
             x.v.resize(bytes.size() / sizeof(float));
             if (!bytes.empty()) std::memcpy(x.v.data(), bytes.data(), bytes.size());
             return caf::none;
           }));
}

}  // namespace orzo
