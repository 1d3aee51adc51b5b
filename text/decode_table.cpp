#include "text/decode_table.hpp"

#include "text/detokenizer.hpp"

namespace orzo {

// The streaming detokenizer run to the end, so the two cannot disagree.
std::string decode(const DecodeTable& table, const int32_t* ids, size_t n, bool skip_special) {
  Detokenizer detokenizer(table, skip_special);
  std::string text;
  for (size_t i = 0; i < n; ++i) text += detokenizer.push(ids[i]);
  text += detokenizer.finish();
  return text;
}

}  // namespace orzo
