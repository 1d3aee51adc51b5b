#pragma once
// GPT-2's byte-level alphabet: every byte has a printable stand-in character, so a
// byte-level BPE vocabulary is a set of ordinary strings. Encoding maps raw bytes to the
// stand-ins before BPE; decoding maps a token's characters back to bytes.
#include <optional>
#include <string>
#include <string_view>

namespace orzo {

// Appends the stand-in characters (UTF-8) of each byte of `bytes` to `out`.
void append_byte_level(std::string_view bytes, std::string& out);

// The bytes a byte-level token stands for, or nullopt when one of its characters is not a
// stand-in (added tokens written as plain text, which then decode as themselves).
std::optional<std::string> bytes_of_byte_level(std::string_view token);

}  // namespace orzo
