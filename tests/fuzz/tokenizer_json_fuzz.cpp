// libFuzzer entry point for the HF tokenizer.json loader: arbitrary bytes must give a
// tokenizer or a LoadError, and whatever loads must encode a fixed text (a runaway
// user-supplied split regex may throw) and decode the result.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/load_error.hpp"
#include "text/tokenizer/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  try {
    const orzo::Tokenizer tok = orzo::Tokenizer::from_hf_json_text(input, "", "fuzz-input");
    try {
      const auto ids = tok.encode("Hello, wörld! <s> 123 \xF0\x9F\x91\x8D  \t\n<|im_end|> caf\xC3\xA9", true);
      for (int32_t id : ids)
        if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
      (void)tok.decode(ids, false);
    } catch (const std::runtime_error&) {
    }
  } catch (const orzo::LoadError&) {
  }
  return 0;
}
