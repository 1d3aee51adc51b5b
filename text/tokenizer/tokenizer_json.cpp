// Tokenizer::from_hf_json / from_hf_dir: HF `tokenizers` tokenizer.json (with transformers'
// tokenizer_config.json) read into a TokenizerSpec. Every component type is either
// reproduced exactly or refused by name.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/load_error.hpp"
#include "core/read_file.hpp"
#include "text/tokenizer/pretokenizer.hpp"
#include "text/tokenizer/tokenizer.hpp"
#include "text/tokenizer/unicode.hpp"

namespace orzo {
namespace {

using nlohmann::json;

class JsonReader {
 public:
  explicit JsonReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void refuse(const std::string& what) const { throw LoadError(source_ + ": " + what + " is not supported"); }
  [[noreturn]] void fail(const std::string& what) const { throw LoadError(source_ + ": " + what); }

  static std::string type_of(const json& j) {
    return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : std::string("?");
  }

  static const json* field(const json& j, const char* key) {
    if (!j.is_object()) return nullptr;
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  static bool flag(const json& j, const char* key, bool fallback) {
    const json* f = field(j, key);
    return f ? f->get<bool>() : fallback;
  }
  // An integer that fits int32 (nlohmann would cast a float or a huge number silently).
  int32_t integer(const json& j, const std::string& what) const {
    if (!j.is_number_integer()) fail(what + " is not an integer");
    if (j.is_number_unsigned() ? j.get<uint64_t>() > INT32_MAX : (j.get<int64_t>() < INT32_MIN || j.get<int64_t>() > INT32_MAX))
      fail(what + " " + j.dump() + " is out of range");
    return static_cast<int32_t>(j.get<int64_t>());
  }

  static std::string text(const json& j, const char* key, const std::string& fallback = "") {
    const json* f = field(j, key);
    return f ? f->get<std::string>() : fallback;
  }

  // A Split/Replace pattern: {"String": s} or {"Regex": r}.
  std::pair<std::string, bool> pattern(const json& j, const char* where) const {
    const json* p = field(j, "pattern");
    if (!p) fail(std::string(where) + " has no pattern");
    if (const json* s = field(*p, "String")) return {s->get<std::string>(), false};
    if (const json* r = field(*p, "Regex")) return {r->get<std::string>(), true};
    fail(std::string(where) + " pattern is neither String nor Regex");
  }

  void normalizer(const json& j, Normalizer& n) const {
    const std::string type = type_of(j);
    if (type == "Sequence") {
      for (const json& step : j.at("normalizers")) normalizer(step, n);
    } else if (type == "NFC") {
      n.add_unicode_form(Normalizer::Form::NFC);
    } else if (type == "NFD") {
      n.add_unicode_form(Normalizer::Form::NFD);
    } else if (type == "NFKC") {
      n.add_unicode_form(Normalizer::Form::NFKC);
    } else if (type == "NFKD") {
      n.add_unicode_form(Normalizer::Form::NFKD);
    } else if (type == "Prepend") {
      n.add_prepend(j.at("prepend").get<std::string>());
    } else if (type == "Replace") {
      auto [pat, is_regex] = pattern(j, "Replace normalizer");
      const std::string content = j.at("content").get<std::string>();
      if (is_regex) {
        n.add_replace_regex(compile(pat, "normalizer Replace"), content);
      } else {
        n.add_replace(pat, content);
      }
    } else if (type == "Lowercase") {
      n.add_lowercase();
    } else if (type == "Strip") {
      n.add_strip(flag(j, "strip_left", true), flag(j, "strip_right", true));
    } else {
      refuse("normalizer type '" + type + "'");
    }
  }

  std::shared_ptr<const SplitRegex> compile(const std::string& regex, const std::string& where) const {
    try {
      return std::make_shared<const SplitRegex>(regex);
    } catch (const std::invalid_argument& e) {
      fail(where + ": " + e.what());
    }
  }

  // A pattern HF matches literally. An empty one matches nothing there.
  std::shared_ptr<const SplitRegex> literal(const std::string& text, const std::string& where) const {
    return compile(text.empty() ? std::string("(*FAIL)") : escape_regex(text), where);
  }

  PreTokenizer::SplitBehavior behavior(const json& j, const std::string& where, const char* fallback) const {
    const std::string b = text(j, "behavior", fallback);
    if (b == "Removed") return PreTokenizer::SplitBehavior::Removed;
    if (b == "Isolated") return PreTokenizer::SplitBehavior::Isolated;
    if (b == "MergedWithPrevious") return PreTokenizer::SplitBehavior::MergedWithPrevious;
    if (b == "MergedWithNext") return PreTokenizer::SplitBehavior::MergedWithNext;
    if (b == "Contiguous") return PreTokenizer::SplitBehavior::Contiguous;
    refuse("pre_tokenizer " + where + " behavior '" + b + "'");
  }

  static std::string escape_regex(const std::string& literal) {
    std::string out;
    for (char c : literal) {
      if (std::string_view("\\^$.|?*+()[]{}-").find(c) != std::string_view::npos) out += '\\';
      out += c;
    }
    return out;
  }

  void pre_tokenizer(const json& j, PreTokenizer& p) const {
    const std::string type = type_of(j);
    if (type == "Sequence") {
      for (const json& step : j.at("pretokenizers")) pre_tokenizer(step, p);
    } else if (type == "Split") {
      auto [pat, is_regex] = pattern(j, "Split pre_tokenizer");
      const auto b = behavior(j, "Split", "Isolated");
      p.add_split(is_regex ? compile(pat, "pre_tokenizer Split") : literal(pat, "pre_tokenizer Split"), b,
                  flag(j, "invert", false));
    } else if (type == "Digits") {
      p.add_digits(flag(j, "individual_digits", false));
    } else if (type == "Punctuation") {
      p.add_punctuation(behavior(j, "Punctuation", "Isolated"));
    } else if (type == "Whitespace") {
      p.add_whitespace();
    } else if (type == "WhitespaceSplit") {
      p.add_whitespace_split();
    } else if (type == "ByteLevel") {
      p.add_byte_level(flag(j, "add_prefix_space", true), flag(j, "use_regex", true));
    } else if (type == "Metaspace") {
      const std::string replacement = text(j, "replacement", "\xE2\x96\x81");
      size_t end = 0;
      if (!replacement.empty()) next_code_point(replacement, end);
      if (replacement.empty() || end != replacement.size()) fail("Metaspace replacement '" + replacement + "' is not one character");
      p.add_metaspace(replacement, prepend_scheme(j), flag(j, "split", true));
    } else {
      refuse("pre_tokenizer type '" + type + "'");
    }
  }

  PreTokenizer::PrependScheme prepend_scheme(const json& j) const {
    if (const json* s = field(j, "prepend_scheme")) {
      const std::string v = s->get<std::string>();
      if (v == "always") return PreTokenizer::PrependScheme::Always;
      if (v == "first") return PreTokenizer::PrependScheme::First;
      if (v == "never") return PreTokenizer::PrependScheme::Never;
      refuse("Metaspace prepend_scheme '" + v + "'");
    }
    return flag(j, "add_prefix_space", true) ? PreTokenizer::PrependScheme::Always : PreTokenizer::PrependScheme::Never;
  }

  // The decoder chain, reduced to what DecodeTable can express.
  void decoder(const json& j, TokenizerSpec& spec) const {
    const std::string type = type_of(j);
    if (type == "ByteLevel") {
      spec.decoding = TokenDecoding::ByteLevel;
    } else if (type == "Metaspace") {
      if (text(j, "replacement", "\xE2\x96\x81") != "\xE2\x96\x81") refuse("Metaspace decoder with a replacement other than '\xE2\x96\x81'");
      spec.decoding = TokenDecoding::SentencePiece;
      spec.strip_leading_space = prepend_scheme(j) != PreTokenizer::PrependScheme::Never;
    } else if (type == "Sequence") {
      bool replace = false;
      for (const json& d : j.at("decoders")) {
        const std::string t = type_of(d);
        if (t == "Replace") {
          auto [pat, is_regex] = pattern(d, "Replace decoder");
          if (is_regex || pat != "\xE2\x96\x81" || d.at("content").get<std::string>() != " ")
            refuse("decoder Replace other than '\xE2\x96\x81' -> ' '");
          replace = true;
        } else if (t == "ByteFallback") {
          spec.decode_byte_fallback = true;
        } else if (t == "Strip") {
          const int32_t start = integer(d.at("start"), "Strip start"), stop = integer(d.at("stop"), "Strip stop");
          if (d.at("content").get<std::string>() != " " || start < 0 || start > 1 || stop != 0)
            refuse("decoder Strip other than (' ', 1, 0)");
          spec.strip_leading_space = start == 1;
        } else if (t != "Fuse") {
          refuse("decoder type '" + t + "' in a Sequence");
        }
      }
      if (!replace) refuse("decoder Sequence without Replace('\xE2\x96\x81', ' ')");
      spec.decoding = TokenDecoding::SentencePiece;
    } else {
      refuse("decoder type '" + type + "'");
    }
  }

  void post_processor(const json& j, const std::vector<AddedToken>& added, TokenizerSpec& spec) const {
    const std::string type = type_of(j);
    auto id_of = [&](const std::string& content) -> int32_t {
      for (const AddedToken& t : added)
        if (t.content == content) return t.id;
      if (auto id = spec.model->id_of(content)) return *id;
      fail("post_processor token '" + content + "' is not in the vocabulary");
    };
    if (type == "Sequence") {
      for (const json& step : j.at("processors")) post_processor(step, added, spec);
    } else if (type == "ByteLevel") {
    } else if (type == "TemplateProcessing") {
      bool after = false;
      for (const json& item : j.at("single")) {
        if (field(item, "Sequence")) {
          if (after) refuse("TemplateProcessing with two sequences in 'single'");
          after = true;
        } else if (const json* s = field(item, "SpecialToken")) {
          const std::string name = s->at("id").get<std::string>();
          const json& entry = j.at("special_tokens").at(name);
          for (const json& id : entry.at("ids")) (after ? spec.suffix_ids : spec.prefix_ids).push_back(integer(id, "TemplateProcessing id"));
        } else {
          fail("TemplateProcessing item is neither Sequence nor SpecialToken");
        }
      }
    } else if (type == "RobertaProcessing" || type == "BertProcessing") {
      spec.prefix_ids.push_back(id_of(j.at("cls").at(0).get<std::string>()));
      spec.suffix_ids.push_back(id_of(j.at("sep").at(0).get<std::string>()));
    } else {
      refuse("post_processor type '" + type + "'");
    }
  }

  void model(const json& m, bool byte_level, TokenizerSpec& spec) const {
    const std::string type = type_of(m);
    if (type != "BPE" && !(type == "?" && field(m, "merges"))) refuse("model type '" + type + "'");
    if (const json* d = field(m, "dropout"))
      if (d->get<double>() != 0.0) refuse("BPE dropout");
    if (!text(m, "continuing_subword_prefix").empty()) refuse("BPE continuing_subword_prefix");
    if (!text(m, "end_of_word_suffix").empty()) refuse("BPE end_of_word_suffix");
    const json& vocab = m.at("vocab");
    if (!vocab.is_object()) fail("model vocab is not an object");
    std::vector<std::string> pieces;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      const int32_t id = integer(it.value(), "vocab id of '" + it.key() + "'");
      // Ids run 0..N-1 in real files; a little slack, but never an allocation the file
      // itself does not pay for.
      if (id < 0 || static_cast<uint64_t>(id) >= vocab.size() + 65536)
        fail("vocab id " + std::to_string(id) + " is out of range for " + std::to_string(vocab.size()) + " entries");
      if (static_cast<size_t>(id) >= pieces.size()) pieces.resize(static_cast<size_t>(id) + 1);
      pieces[static_cast<size_t>(id)] = it.key();
    }
    std::vector<std::pair<std::string, std::string>> merges;
    if (const json* ms = field(m, "merges")) {
      merges.reserve(ms->size());
      for (const json& merge : *ms) {
        if (merge.is_string()) {
          const std::string s = merge.get<std::string>();
          const size_t space = s.find(' ');
          if (space == std::string::npos) fail("merge '" + s + "' has no space");
          merges.emplace_back(s.substr(0, space), s.substr(space + 1));
        } else {
          if (merge.size() != 2) fail("a merge is not a pair");
          merges.emplace_back(merge.at(0).get<std::string>(), merge.at(1).get<std::string>());
        }
      }
    }
    BpeModel::Options o;
    o.byte_level = byte_level;
    o.byte_fallback = flag(m, "byte_fallback", false);
    o.fuse_unk = flag(m, "fuse_unk", false);
    o.ignore_merges = flag(m, "ignore_merges", false);
    if (const json* unk = field(m, "unk_token")) {
      const std::string u = unk->get<std::string>();
      for (size_t id = 0; id < pieces.size(); ++id)
        if (pieces[id] == u) o.unk_id = static_cast<int32_t>(id);
      if (!o.unk_id) fail("unk_token '" + u + "' is not in the vocabulary");
    }
    try {
      spec.model = std::make_unique<BpeModel>(BpeModel::from_merges(std::move(pieces), merges, o));
    } catch (const std::invalid_argument& e) {
      fail(e.what());
    }
  }

  bool pre_tokenizer_is_byte_level(const json& j) const {
    const std::string type = type_of(j);
    if (type == "ByteLevel") return true;
    if (type == "Sequence")
      for (const json& step : j.at("pretokenizers"))
        if (pre_tokenizer_is_byte_level(step)) return true;
    return false;
  }

 private:
  std::string source_;
};

json parse_json(const std::string& text, const std::string& source) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw LoadError(source + ": not valid JSON: " + e.what());
  }
}

// tokenizer_config.json writes special tokens as strings or as {"content": ...} objects.
std::optional<std::string> config_token(const json& config, const char* key) {
  const json* t = JsonReader::field(config, key);
  if (!t) return std::nullopt;
  if (t->is_string()) return t->get<std::string>();
  if (const json* c = JsonReader::field(*t, "content")) return c->get<std::string>();
  return std::nullopt;
}

std::string config_chat_template(const json& config) {
  const json* t = JsonReader::field(config, "chat_template");
  if (!t) return "";
  if (t->is_string()) return t->get<std::string>();
  // A list of named templates: the "default" one is what apply_chat_template uses.
  for (const json& named : *t)
    if (JsonReader::text(named, "name") == "default") return JsonReader::text(named, "template");
  return "";
}

TokenizerSpec build(const json& tj, const std::string& path, const json* config) {
  JsonReader r(path);
  TokenizerSpec spec;
  spec.source = path;
  const json* pre = JsonReader::field(tj, "pre_tokenizer");
  if (pre) r.pre_tokenizer(*pre, spec.pre_tokenizer);
  // Byte-level vocabularies spell bytes as GPT-2 characters, so BPE must see them so.
  r.model(tj.at("model"), pre && r.pre_tokenizer_is_byte_level(*pre), spec);
  if (const json* n = JsonReader::field(tj, "normalizer")) r.normalizer(*n, spec.normalizer);
  if (const json* added = JsonReader::field(tj, "added_tokens")) {
    for (const json& a : *added) {
      AddedToken t;
      t.id = r.integer(a.at("id"), "added token id");
      t.content = a.at("content").get<std::string>();
      t.special = JsonReader::flag(a, "special", false);
      t.lstrip = JsonReader::flag(a, "lstrip", false);
      t.rstrip = JsonReader::flag(a, "rstrip", false);
      t.single_word = JsonReader::flag(a, "single_word", false);
      t.normalized = JsonReader::flag(a, "normalized", !t.special);
      spec.added_tokens.push_back(std::move(t));
    }
  }
  if (const json* d = JsonReader::field(tj, "decoder")) r.decoder(*d, spec);
  if (const json* p = JsonReader::field(tj, "post_processor")) r.post_processor(*p, spec.added_tokens, spec);
  auto find_id = [&](const std::string& content) -> std::optional<int32_t> {
    for (const AddedToken& t : spec.added_tokens)
      if (t.content == content) return t.id;
    return spec.model->id_of(content);
  };
  if (config) {
    auto bos = config_token(*config, "bos_token"), eos = config_token(*config, "eos_token");
    if (bos) spec.bos_id = find_id(*bos);
    if (eos) spec.eos_id = find_id(*eos);
    if (bos && !spec.bos_id) throw LoadError(path + ": bos_token '" + *bos + "' is not in the vocabulary");
    if (eos && !spec.eos_id) throw LoadError(path + ": eos_token '" + *eos + "' is not in the vocabulary");
    // transformers rebuilds the post-processor from add_bos_token/add_eos_token where the
    // config states them (LlamaTokenizer and kin), which is what callers of such models see.
    auto apply_flag = [&](const char* key, const std::optional<int32_t>& id, std::vector<int32_t>& ids, bool at_front) {
      const json* f = JsonReader::field(*config, key);
      if (!f || !id) return;
      ids.erase(std::remove(ids.begin(), ids.end(), *id), ids.end());
      if (f->get<bool>()) ids.insert(at_front ? ids.begin() : ids.end(), *id);
    };
    apply_flag("add_bos_token", spec.bos_id, spec.prefix_ids, true);
    apply_flag("add_eos_token", spec.eos_id, spec.suffix_ids, false);
    spec.chat_template = config_chat_template(*config);
  }
  return spec;
}

// The texts of a HF tokenizer directory's files; null where a file is absent.
struct HfTexts {
  std::string tokenizer_json, source;
  const std::string* tokenizer_config = nullptr;
  std::string config_source;
  const std::string* generation_config = nullptr;
  std::string generation_source;
  const std::string* chat_template = nullptr;
};

Tokenizer load(const HfTexts& in) {
  const json tj = parse_json(in.tokenizer_json, in.source);
  json config;
  if (in.tokenizer_config) config = parse_json(*in.tokenizer_config, in.config_source);
  TokenizerSpec spec;
  try {
    spec = build(tj, in.source, in.tokenizer_config ? &config : nullptr);
  } catch (const json::exception& e) {
    throw LoadError(in.source + " (or " + (in.tokenizer_config ? in.config_source : "its config") +
                    "): unexpected structure: " + e.what());
  }
  if (in.generation_config) {
    // generation_config.json lists the ids that end a reply (e.g. end-of-turn tokens).
    const json g = parse_json(*in.generation_config, in.generation_source);
    const JsonReader generation(in.generation_source);
    if (const json* e = JsonReader::field(g, "eos_token_id")) {
      if (e->is_number_integer()) {
        spec.end_of_turn_ids.push_back(generation.integer(*e, "eos_token_id"));
      } else if (e->is_array()) {
        for (const json& id : *e)
          spec.end_of_turn_ids.push_back(generation.integer(id, "eos_token_id"));
      }
    }
  }
  if (in.chat_template) spec.chat_template = *in.chat_template;  // chat_template.jinja wins, as in transformers
  return Tokenizer(std::move(spec));
}

bool exists(const std::string& path) { return std::ifstream(path).good(); }

}  // namespace

Tokenizer Tokenizer::from_hf_json(const std::string& tokenizer_json_path, const std::string& tokenizer_config_path) {
  HfTexts in;
  in.tokenizer_json = read_file(tokenizer_json_path);
  in.source = tokenizer_json_path;
  std::string config;
  if (!tokenizer_config_path.empty()) {
    config = read_file(tokenizer_config_path);
    in.tokenizer_config = &config;
    in.config_source = tokenizer_config_path;
  }
  return load(in);
}

Tokenizer Tokenizer::from_hf_json_text(const std::string& tokenizer_json, const std::string& tokenizer_config_json,
                                       const std::string& source) {
  HfTexts in;
  in.tokenizer_json = tokenizer_json;
  in.source = source;
  if (!tokenizer_config_json.empty()) {
    in.tokenizer_config = &tokenizer_config_json;
    in.config_source = source + " config";
  }
  return load(in);
}

Tokenizer Tokenizer::from_hf_dir(const std::string& dir) {
  HfTexts in;
  in.source = dir + "/tokenizer.json";
  in.tokenizer_json = read_file(in.source);
  std::string config, generation, chat_template;
  auto optional = [&](const char* name, std::string& text, const std::string*& slot, std::string* source) {
    const std::string path = dir + "/" + name;
    if (!exists(path)) return;
    text = read_file(path);
    slot = &text;
    if (source) *source = path;
  };
  optional("tokenizer_config.json", config, in.tokenizer_config, &in.config_source);
  optional("generation_config.json", generation, in.generation_config, &in.generation_source);
  optional("chat_template.jinja", chat_template, in.chat_template, nullptr);
  return load(in);
}

}  // namespace orzo
