#pragma once
// The few Unicode facts the tokenizers need: UTF-8 sequence lengths and validity, the
// White_Space property (added tokens' lstrip/rstrip), and a repair that turns arbitrary
// bytes into valid UTF-8 the way Rust's from_utf8_lossy does, since HF `tokenizers`
// only ever sees valid text and the split regexes run with UTF checks off.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace orzo {

bool is_valid_utf8(std::string_view s);

// Each maximal invalid subsequence replaced by U+FFFD.
std::string repair_utf8(std::string_view s);

// Decodes the code point at s[i] of valid UTF-8 and advances i past it.
char32_t next_code_point(std::string_view s, size_t& i);

// Decodes the code point that ends just before s[i] of valid UTF-8.
char32_t previous_code_point(std::string_view s, size_t i);

void append_utf8(char32_t cp, std::string& out);

bool is_unicode_whitespace(char32_t cp);

}  // namespace orzo
