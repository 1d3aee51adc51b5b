#include "text/tokenizer/gguf_pre_type.hpp"

#include <memory>

namespace orzo {
namespace {

// llama.cpp runs each regex of a list over every piece the previous ones left, keeping
// the text between matches as pieces too: HF's Split with behavior Isolated.
void add_isolated(PreTokenizer& p, std::initializer_list<const char*> regexes) {
  for (const char* r : regexes) p.add_split(std::make_shared<const SplitRegex>(r), PreTokenizer::SplitBehavior::Isolated);
}

// DeepSeek LLM's letters: Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee, Glagolitic,
// Coptic, Deseret and other cased scripts, as its tokenizer.json lists them.
constexpr const char* kDeepSeekLetters =
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373"
    "\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f"
    "\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
    "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d"
    "\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4"
    "\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
    "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d"
    "\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a"
    "\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2"
    "\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+";
// CJK ideographs, the blocks from Samaritan up to them, and Hangul (DeepSeek's own list).
constexpr const char* kDeepSeekCjk = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";

// The Tekken (Mistral Nemo) regex: words split at case changes, single digits.
constexpr const char* kTekkenSplitRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

enum class Family { Default, Gpt2, Llama3, Qwen2, DigitsThenGpt2, DigitsThenGpt2Nfc, DeepSeekLlm, DeepSeekCoder, Tekken };

struct Name {
  const char* name;
  Family family;
};

constexpr Name kNames[] = {
    {"default", Family::Default},
    {"gpt-2", Family::Gpt2},
    {"phi-2", Family::Gpt2},
    {"olmo", Family::Gpt2},
    {"llama-bpe", Family::Llama3},
    {"llama3", Family::Llama3},
    {"qwen2", Family::Qwen2},
    {"deepseek-r1-qwen", Family::Qwen2},
    {"smollm", Family::DigitsThenGpt2},
    {"starcoder", Family::DigitsThenGpt2},
    {"command-r", Family::DigitsThenGpt2Nfc},
    {"deepseek-llm", Family::DeepSeekLlm},
    {"deepseek-coder", Family::DeepSeekCoder},
    {"tekken", Family::Tekken},
};

}  // namespace

std::optional<GgufPreType> gguf_pre_type(const std::string& name) {
  const Name* found = nullptr;
  for (const Name& n : kNames)
    if (name == n.name) found = &n;
  if (!found) return std::nullopt;
  GgufPreType t;
  PreTokenizer& p = t.pre_tokenizer;
  switch (found->family) {
    case Family::Default:
      // llama.cpp's rules for a vocabulary that names no family: punctuation runs first,
      // then GPT-2's split, then digit runs, then three ASCII digits at a time.
      add_isolated(p, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2SplitRegex, R"(\p{N}+)", "[0-9][0-9][0-9]"});
      break;
    case Family::Gpt2: add_isolated(p, {kGpt2SplitRegex}); break;
    case Family::Llama3:
      add_isolated(p, {kLlama3SplitRegex});
      t.ignore_merges = true;
      break;
    case Family::Qwen2:
      t.normalizer.add_unicode_form(Normalizer::Form::NFC);
      add_isolated(p, {kQwen2SplitRegex});
      break;
    case Family::DigitsThenGpt2Nfc:
      t.normalizer.add_unicode_form(Normalizer::Form::NFC);
      [[fallthrough]];
    case Family::DigitsThenGpt2:
      // HF's Digits(individual_digits=true) before ByteLevel.
      p.add_digits(true);
      add_isolated(p, {kGpt2SplitRegex});
      break;
    case Family::DeepSeekLlm:
      add_isolated(p, {"[\r\n]", kDeepSeekLetters, "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
                       R"(\s+$)", kDeepSeekCjk, R"(\p{N}+)"});
      break;
    case Family::DeepSeekCoder:
      add_isolated(p, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepSeekCjk, R"(\p{N})"});
      break;
    case Family::Tekken:
      add_isolated(p, {kTekkenSplitRegex});
      t.ignore_merges = true;
      break;
  }
  return t;
}

std::vector<std::string> gguf_pre_type_names() {
  std::vector<std::string> names;
  for (const Name& n : kNames) names.emplace_back(n.name);
  return names;
}

}  // namespace orzo
