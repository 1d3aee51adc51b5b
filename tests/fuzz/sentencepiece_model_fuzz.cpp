// libFuzzer entry point for the SentencePiece .model reader: arbitrary bytes must give a
// tokenizer or a LoadError, and whatever loads must encode and decode a fixed text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/load_error.hpp"
#include "text/tokenizer/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const orzo::Tokenizer tok = orzo::Tokenizer::from_sentencepiece_model_bytes(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz-input");
    const auto ids = tok.encode("Hello, w\xC3\xB6rld! <s> 123 \xF0\x9F\x91\x8D  \t\n</s>", true);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
    (void)tok.decode(ids, false);
  } catch (const orzo::LoadError&) {
  }
  return 0;
}
