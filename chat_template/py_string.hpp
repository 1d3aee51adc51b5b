#pragma once
// Python's str semantics on UTF-8 text, for the chat-template interpreter: Jinja templates run
// on Python strings, so whitespace, strip/split, indexing, repr and float formatting must follow
// CPython (indices count code points, whitespace is str.isspace(), floats print as repr()).
// Text is kept as UTF-8 bytes and decoded only where code points matter.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace orzo::py {

// Decodes UTF-8; throws ChatTemplateError on invalid input.
std::u32string decode_utf8(std::string_view s);
std::string encode_utf8(std::u32string_view s);
void append_utf8(std::string& out, char32_t cp);
size_t count_code_points(std::string_view s);  // s must be valid UTF-8

bool is_space(char32_t c);  // str.isspace()

// str.strip/lstrip/rstrip; chars == nullopt strips whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit) and str.rsplit; sep == nullopt splits on whitespace runs.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
// str.replace(old, new, count); count < 0 replaces all.
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);

std::string repr(std::string_view s);  // repr(str): quotes chosen and characters escaped as CPython does
std::string float_repr(double v);      // repr(float): shortest round-trip digits, CPython's layout

}  // namespace orzo::py
