#pragma once
// Pre-tokenization: cutting normalized text into the pieces BPE runs on, as HF
// `tokenizers` does it: a list of steps, each applied to every piece the previous steps
// made. Every split (HF's Split, and Digits, Punctuation, Whitespace and WhitespaceSplit, which
// HF also runs as splits) is a PCRE2 pattern with UTF and UCP so that \p{L}, \p{N} and \s
// have their Unicode meaning, JIT-compiled where PCRE2 offers it.
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace orzo {

// A compiled PCRE2 pattern; shared by the pre-tokenizer steps that use it.
class SplitRegex {
 public:
  explicit SplitRegex(const std::string& pattern);  // throws std::invalid_argument
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // Every match of for_each_match below, as (begin, end) byte offsets.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  friend class PreTokenizer;
  // Calls on_match(begin, end) for each successive non-overlapping match in valid UTF-8
  // `text`, as HF's find_iter reports them: an empty match is reported unless it touches the
  // end of the previous match, and the search then moves on by one character. (Defined in
  // pretokenizer.cpp, its only user.)
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
  // What becomes of each match (HF's SplitDelimiterBehavior): dropped, a piece of its own,
  // joined to the piece before or after it, or joined with the matches it touches.
  enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
  enum class PrependScheme { Always, First, Never };

  // Cuts each piece at the matches of `regex` (with `invert`, at the text between them).
  void add_split(std::shared_ptr<const SplitRegex> regex, SplitBehavior behavior, bool invert = false);
  // HF's Digits: each digit alone (individual_digits) or runs of digits, as pieces.
  void add_digits(bool individual);
  // HF's Punctuation: each punctuation character is a match, handled per `behavior`.
  void add_punctuation(SplitBehavior behavior);
  // HF's Whitespace: runs of word characters and runs of other non-space characters; the
  // whitespace between them is dropped.
  void add_whitespace();
  // HF's WhitespaceSplit: the text between whitespace.
  void add_whitespace_split();
  // GPT-2's ByteLevel step: a space before each piece that lacks one, then the GPT-2 split.
  // (The byte-to-character mapping itself happens in the model, after the cache lookup.)
  void add_byte_level(bool add_prefix_space, bool use_regex);
  // SentencePiece's Metaspace: ' ' becomes `replacement`, which is prepended per `scheme`
  // (First: only to the piece at the start of the input) and, with `split`, starts a piece.
  // `replacement` must be one character.
  void add_metaspace(std::string replacement, PrependScheme scheme, bool split);

  bool empty() const { return steps_.empty(); }

  // Working storage reused across calls, so a long text costs no allocation per piece.
  struct Stretch {  // a match of a split, or the text between two
    size_t begin, end;
    bool match;
  };
  struct Scratch {
    std::vector<std::string_view> pieces, next;
    std::vector<Stretch> stretches;
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
    bool invert = false;
    bool add_prefix_space = false;
    std::string replacement;
    PrependScheme scheme = PrependScheme::Always;
    bool split = false;
  };
  void split_piece(const Step& step, std::string_view piece, Scratch& scratch) const;
  std::vector<Step> steps_;
};

}  // namespace orzo
