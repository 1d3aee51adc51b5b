# cmake -DIN=file -DOUT=file.cpp -DNAME=symbol -P embed_text.cmake: a C++ source defining
# `std::string_view orzo::NAME()` as the bytes of IN, so a text file ships inside the binary
# (C++17 has no #embed). Run at build time, so an edit of IN rebuilds it.
file(READ "${IN}" content)
set(delimiter "orzo_embed")
string(FIND "${content}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains )${delimiter}\", the raw string's end")
endif()
file(WRITE "${OUT}" "// Generated from ${IN} by cmake/embed_text.cmake.\n#include <string_view>\n\n"
  "namespace orzo {\n\nstd::string_view ${NAME}() {\n  static constexpr char text[] = R\"${delimiter}(${content})${delimiter}\";\n"
  "  return {text, sizeof text - 1};\n}\n\n}  // namespace orzo\n")
