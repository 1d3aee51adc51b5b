#pragma once
// Pre-tokenization: cutting normalized text into the pieces BPE runs on, as HF
// `tokenizers` does it: a list of steps, each applied to every piece the previous steps
// made. The split regexes (GPT-2, Llama 3, Qwen2) run in PCRE2 with UTF and UCP so that
// \p{L}, \p{N} and \s have their Unicode meaning, JIT-compiled where PCRE2 offers it.
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace orzo {

// A compiled PCRE2 pattern; shared by the pre-tokenizer steps that use it.
class SplitRegex {
 public:
  explicit SplitRegex(const std::string& pattern);  // throws std::invalid_argument
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

 private:
  friend class PreTokenizer;
  // Calls on_match(begin, end) for each successive non-overlapping match in valid UTF-8
  // `text`; an empty match advances by one character. (Defined in pretokenizer.cpp, its
  // only user.)
  template <class F>
  void for_each_match(std::string_view text, F&& on_match) const;

  struct MatchData;
  bool match_at(std::string_view text, size_t start, MatchData& md, size_t& begin, size_t& end) const;
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
};

// The regexes llama.cpp names in tokenizer.ggml.pre, written as HF's tokenizer.json files
// write them.
extern const char* const kGpt2SplitRegex;
extern const char* const kLlama3SplitRegex;
extern const char* const kQwen2SplitRegex;

class PreTokenizer {
 public:
  enum class SplitBehavior { Isolated, Removed };
  enum class PrependScheme { Always, First, Never };

  // Pieces and matches of `regex` become pieces (Isolated) or matches are dropped (Removed).
  void add_split(std::shared_ptr<const SplitRegex> regex, SplitBehavior behavior);
  // GPT-2's ByteLevel step: a space before each piece that lacks one, then the GPT-2 split.
  // (The byte-to-character mapping itself happens in the model, after the cache lookup.)
  void add_byte_level(bool add_prefix_space, bool use_regex);
  // SentencePiece's Metaspace: ' ' becomes `replacement`, which is prepended per `scheme`
  // (First: only to the piece at the start of the input) and, with `split`, starts a piece.
  // `replacement` must be one character.
  void add_metaspace(std::string replacement, PrependScheme scheme, bool split);

  bool empty() const { return steps_.empty(); }

  // Working storage reused across calls, so a long text costs no allocation per piece.
  struct Scratch {
    std::vector<std::string_view> pieces, next;
    std::deque<std::string> owned;
  };

  // Cuts `text` into pieces (views into `text` or into scratch.owned), left in
  // scratch.pieces. `at_input_start` tells whether `text` begins the whole input.
  void run(std::string_view text, bool at_input_start, Scratch& scratch) const;

 private:
  struct Step {
    enum class Kind { Split, ByteLevel, Metaspace } kind = Kind::Split;
    std::shared_ptr<const SplitRegex> regex;  // Split; ByteLevel with use_regex
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool add_prefix_space = false;
    std::string replacement;
    PrependScheme scheme = PrependScheme::Always;
    bool split = false;
  };
  void split_piece(const Step& step, std::string_view piece, std::vector<std::string_view>& out) const;
  std::vector<Step> steps_;
};

}  // namespace orzo
