// libFuzzer entry point for the HF config reader: config.json and generation_config.json
// text (split at the first NUL byte) must give a validated config or throw LoadError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/load_error.hpp"
#include "runtime/model_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string config = input.substr(0, split);
  const std::string generation = split == std::string::npos ? std::string() : input.substr(split + 1);
  try {
    const orzo::ModelConfig c = orzo::parse_hf_config(config, generation, "fuzz-input");
    // What parses must be usable: the RoPE tables (short and long) have one entry per rotated
    // pair, and every layer's terms can be asked for.
    const auto pairs = static_cast<size_t>(c.rope_dim() / 2);
    if (c.rope_dim() > c.head_dim || !(c.rope_scaling.attention_factor > 0)) __builtin_trap();
    if (orzo::rope_inv_freq(c).size() != pairs || orzo::rope_inv_freq(c, false, true).size() != pairs) __builtin_trap();
    if (orzo::rope_inv_freq(c, true).size() != pairs) __builtin_trap();
    for (int64_t l = 0; l < c.num_layers; ++l)
      if (c.window_of(l).value_or(1) <= 0 || (c.local_rope(l) && !c.window_of(l)) || !(c.attention_scale() > 0))
        __builtin_trap();
    for (int64_t l = 0; l < c.num_layers; ++l) (void)c.rotates(l);
    // A MoE model routes each row to between 1 and all of its experts, of a positive width.
    for (int64_t l = 0; l < c.num_layers; ++l)
      if (c.has_experts(l) && (c.experts_per_token < 1 || c.experts_per_token > c.num_experts ||
                               c.expert_intermediate_size <= 0 || c.shared_expert_intermediate_size < 0))
        __builtin_trap();
  } catch (const orzo::LoadError&) {
  }
  return 0;
}
