// Tokenizer::from_gpt2_files: the original GPT-2 release format (vocab.json + merges.txt),
// which HF's GPT2Tokenizer reads: byte-level BPE, the GPT-2 split regex, no prefix space,
// and <|endoftext|> as the one special token.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/load_error.hpp"
#include "text/tokenizer/tokenizer.hpp"

namespace orzo {

Tokenizer Tokenizer::from_gpt2_files(const std::string& vocab_json, const std::string& merges_txt) {
  std::ifstream vin(vocab_json, std::ios::binary);
  if (!vin) throw LoadError(vocab_json + ": cannot open");
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(vin);
  } catch (const nlohmann::json::exception& e) {
    throw LoadError(vocab_json + ": not valid JSON: " + e.what());
  }
  if (!vocab.is_object()) throw LoadError(vocab_json + ": not a token -> id object");
  std::vector<std::string> pieces;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer()) throw LoadError(vocab_json + ": id of '" + it.key() + "' is not an integer");
    const auto id = it.value().get<int64_t>();
    if (id < 0 || static_cast<uint64_t>(id) >= vocab.size() + 65536)
      throw LoadError(vocab_json + ": id " + std::to_string(id) + " is out of range");
    if (static_cast<size_t>(id) >= pieces.size()) pieces.resize(static_cast<size_t>(id) + 1);
    pieces[static_cast<size_t>(id)] = it.key();
  }

  std::ifstream min(merges_txt, std::ios::binary);
  if (!min) throw LoadError(merges_txt + ": cannot open");
  std::vector<std::pair<std::string, std::string>> merges;
  std::string line;
  for (size_t line_no = 1; std::getline(min, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos)
      throw LoadError(merges_txt + ": line " + std::to_string(line_no) + " is not a merge 'a b'");
    merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }

  TokenizerSpec spec;
  spec.source = vocab_json;
  spec.pre_tokenizer.add_byte_level(false, true);
  spec.decoding = TokenDecoding::ByteLevel;
  BpeModel::Options o;
  o.byte_level = true;
  std::optional<int32_t> eot;
  for (size_t id = 0; id < pieces.size(); ++id)
    if (pieces[id] == "<|endoftext|>") eot = static_cast<int32_t>(id);
  try {
    spec.model = std::make_unique<BpeModel>(BpeModel::from_merges(std::move(pieces), merges, o));
  } catch (const std::invalid_argument& e) {
    throw LoadError(merges_txt + ": " + e.what());
  }
  if (eot) {
    AddedToken t;
    t.content = "<|endoftext|>";
    t.id = *eot;
    t.special = true;
    spec.added_tokens.push_back(std::move(t));
    spec.bos_id = spec.eos_id = eot;
  }
  return Tokenizer(std::move(spec));
}

}  // namespace orzo
