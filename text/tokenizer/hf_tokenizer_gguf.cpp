#include "text/tokenizer/hf_tokenizer_gguf.hpp"

#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/gguf_writer.hpp"
#include "text/tokenizer/pretokenizer.hpp"

namespace orzo {
namespace {

using json = nlohmann::json;

std::optional<json> read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  try {
    return json::parse(s.str());
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// Every pre-tokenizer of a (possibly Sequence) pre_tokenizer entry.
void flatten(const json& p, std::vector<json>& out) {
  if (!p.is_object()) return;
  if (p.value("type", "") == "Sequence" && p.contains("pretokenizers")) {
    for (const auto& q : p["pretokenizers"]) flatten(q, out);
  } else {
    out.push_back(p);
  }
}

// llama.cpp's tokenizer.ggml.pre for the split regex of a byte-level BPE, as far as
// Tokenizer::from_gguf knows them; nullopt for another split.
std::optional<std::string> byte_level_pre(const json& tok) {
  std::vector<json> pres;
  flatten(tok.value("pre_tokenizer", json()), pres);
  std::optional<std::string> regex;
  bool byte_level = false, byte_level_split = false;
  for (const auto& p : pres) {
    const std::string type = p.value("type", "");
    if (type == "ByteLevel") {
      byte_level = true;
      byte_level_split = p.value("use_regex", true);
    } else if (type == "Split" && p.contains("pattern") && p["pattern"].contains("Regex")) {
      regex = p["pattern"]["Regex"].get<std::string>();
    } else {
      return std::nullopt;
    }
  }
  if (!byte_level) return std::nullopt;
  if (!regex) return byte_level_split ? std::optional<std::string>("gpt-2") : std::nullopt;
  if (*regex == kLlama3SplitRegex) return "llama-bpe";
  if (*regex == kQwen2SplitRegex) return "qwen2";
  return std::nullopt;
}

// A merge as "left right", from either spelling tokenizers writes.
std::string merge_text(const json& m) {
  if (m.is_string()) return m.get<std::string>();
  return m.at(0).get<std::string>() + " " + m.at(1).get<std::string>();
}

}  // namespace

std::string write_hf_tokenizer_gguf(GgufWriter& out, const std::string& dir) {
  const auto tok = read_json(dir + "/tokenizer.json");
  if (!tok) return "no readable tokenizer.json";
  const json model = tok->value("model", json::object());
  if (model.value("type", "") != "BPE") return "tokenizer.json's model is not BPE";
  const bool byte_fallback = model.value("byte_fallback", false);
  const auto pre = byte_level_pre(*tok);
  if (!pre && !byte_fallback) return "tokenizer.json's pre-tokenizer has no GGUF name";

  // Token types as llama.cpp numbers them: 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte.
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  const auto place = [&](int64_t id, const std::string& text, int32_t type) {
    if (id < 0) return;
    if (static_cast<size_t>(id) >= tokens.size()) {
      tokens.resize(static_cast<size_t>(id) + 1);
      types.resize(static_cast<size_t>(id) + 1, 0);
    }
    tokens[static_cast<size_t>(id)] = text;
    types[static_cast<size_t>(id)] = type;
  };
  const std::string unk = model.value("unk_token", json()).is_string() ? model["unk_token"].get<std::string>() : "";
  // Named, not iterated as temporaries: items() would outlive the json it walks.
  const json vocab = model.value("vocab", json::object()), added = tok->value("added_tokens", json::array());
  for (const auto& [text, id] : vocab.items()) {
    const bool is_byte = byte_fallback && text.size() == 6 && text.rfind("<0x", 0) == 0 && text.back() == '>';
    place(id.get<int64_t>(), text, text == unk ? 2 : is_byte ? 6 : 1);
  }
  for (const auto& a : added) {
    const std::string text = a.value("content", "");
    place(a.value("id", int64_t{-1}), text, text == unk ? 2 : a.value("special", false) ? 3 : 4);
  }
  for (size_t id = 0; id < tokens.size(); ++id)
    if (types[id] == 0) {  // an id neither list names: llama.cpp's converter pads the same way
      tokens[id] = "[PAD" + std::to_string(id) + "]";
      types[id] = 5;
    }

  const auto config = read_json(dir + "/tokenizer_config.json").value_or(json::object());
  // BOS is added when tokenizer_config says so, or when the post-processor's template
  // starts with a special token.
  bool add_bos = false;
  if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) {
    add_bos = config["add_bos_token"].get<bool>();
  } else if (const json post = tok->value("post_processor", json()); post.is_object() && post.contains("single")) {
    add_bos = !post["single"].empty() && post["single"][0].contains("SpecialToken");
  }

  if (byte_fallback) {
    out.add_string("tokenizer.ggml.model", "llama");
    out.add_string_array("tokenizer.ggml.tokens", tokens);
    std::vector<float> scores(tokens.size(), 0.0f);
    for (size_t id = 0; id < tokens.size(); ++id)
      if (types[id] == 1) scores[id] = -static_cast<float>(id);
    out.add_f32_array("tokenizer.ggml.scores", scores);
    out.add_i32_array("tokenizer.ggml.token_type", types);
    if (!unk.empty() && vocab.contains(unk)) out.add_u32("tokenizer.ggml.unknown_token_id", vocab[unk].get<uint32_t>());
  } else {
    out.add_string("tokenizer.ggml.model", "gpt2");
    out.add_string("tokenizer.ggml.pre", *pre);
    out.add_string_array("tokenizer.ggml.tokens", tokens);
    out.add_i32_array("tokenizer.ggml.token_type", types);
    std::vector<std::string> merges;
    const json stored = model.value("merges", json::array());
    for (const auto& m : stored) merges.push_back(merge_text(m));
    out.add_string_array("tokenizer.ggml.merges", merges);
  }
  out.add_bool("tokenizer.ggml.add_bos_token", add_bos);
  if (config.contains("chat_template") && config["chat_template"].is_string())
    out.add_string("tokenizer.chat_template", config["chat_template"].get<std::string>());
  return "";
}

}  // namespace orzo
