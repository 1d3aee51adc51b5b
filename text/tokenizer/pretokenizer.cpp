#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/tokenizer/pretokenizer.hpp"

#include <pcre2.h>

#include <stdexcept>

namespace orzo {

const char* const kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct SplitRegex::MatchData {
  explicit MatchData(const pcre2_code* code) : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
    if (md == nullptr) throw std::bad_alloc();
  }
  ~MatchData() { pcre2_match_data_free(md); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
  pcre2_match_data* md;
};

SplitRegex::SplitRegex(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw std::invalid_argument("regex '" + pattern + "' does not compile at offset " +
                                std::to_string(offset) + ": " + reinterpret_cast<const char*>(message));
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

SplitRegex::~SplitRegex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

bool SplitRegex::match_at(std::string_view text, size_t start, MatchData& md, size_t& begin,
                          size_t& end) const {
  const auto* code = static_cast<const pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // Text reaching here is valid UTF-8 (Tokenizer::encode repairs it first).
  const int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), start, 0, md.md, nullptr)
                      : pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md.md, nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof message);
    throw std::runtime_error(std::string("pre-tokenizer regex failed: ") + reinterpret_cast<const char*>(message));
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.md);
  begin = ov[0];
  end = ov[1];
  return true;
}

template <class F>
void SplitRegex::for_each_match(std::string_view text, F&& on_match) const {
  MatchData md(static_cast<const pcre2_code*>(code_));
  constexpr size_t kNone = static_cast<size_t>(-1);
  size_t pos = 0, begin = 0, end = 0, last_end = kNone;
  // A search may start at the very end, where only an empty match can be found.
  while (pos <= text.size() && match_at(text, pos, md, begin, end)) {
    if (end == begin && end == last_end) {
      // Step over one whole character so the next search starts on a boundary.
      if (pos == text.size()) break;
      ++pos;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    on_match(begin, end);
    pos = last_end = end;
  }
}

void SplitRegex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  out.clear();
  for_each_match(text, [&](size_t begin, size_t end) { out.emplace_back(begin, end); });
}

namespace {

// The word characters of Oniguruma's \w and the spaces of its \s, which HF's Whitespace
// pre-tokenizer is written in (PCRE2's UCP \w leaves out marks and some letters).
constexpr const char* kWhitespaceWords =
    R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]+|[^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\p{White_Space}]+)";

}  // namespace

void PreTokenizer::add_split(std::shared_ptr<const SplitRegex> regex, SplitBehavior behavior, bool invert) {
  Step s;
  s.kind = Step::Kind::Split;
  s.regex = std::move(regex);
  s.behavior = behavior;
  s.invert = invert;
  steps_.push_back(std::move(s));
}

void PreTokenizer::add_digits(bool individual) {
  // Rust's char::is_numeric, which HF tests one character at a time: Nd, Nl and No.
  add_split(std::make_shared<const SplitRegex>(R"(\p{N})"),
            individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
}

void PreTokenizer::add_punctuation(SplitBehavior behavior) {
  // ASCII punctuation (which includes symbols such as $ + < = > ^ ` | ~) or Unicode P*.
  add_split(std::make_shared<const SplitRegex>(R"([\p{P}!-/:-@\[-`{-~])"), behavior);
}

void PreTokenizer::add_whitespace() {
  add_split(std::make_shared<const SplitRegex>(kWhitespaceWords), SplitBehavior::Removed, true);
}

void PreTokenizer::add_whitespace_split() {
  add_split(std::make_shared<const SplitRegex>(R"(\p{White_Space})"), SplitBehavior::Removed);
}

void PreTokenizer::add_byte_level(bool add_prefix_space, bool use_regex) {
  Step s;
  s.kind = Step::Kind::ByteLevel;
  if (use_regex) s.regex = std::make_shared<const SplitRegex>(kGpt2SplitRegex);
  s.add_prefix_space = add_prefix_space;
  steps_.push_back(std::move(s));
}

void PreTokenizer::add_metaspace(std::string replacement, PrependScheme scheme, bool split) {
  Step s;
  s.kind = Step::Kind::Metaspace;
  s.replacement = std::move(replacement);
  s.scheme = scheme;
  s.split = split;
  steps_.push_back(std::move(s));
}

void PreTokenizer::split_piece(const Step& step, std::string_view piece, Scratch& scratch) const {
  std::vector<Stretch>& st = scratch.stretches;
  st.clear();
  size_t gap = 0;
  step.regex->for_each_match(piece, [&](size_t begin, size_t end) {
    if (begin > gap) st.push_back({gap, begin, false});
    st.push_back({begin, end, true});
    gap = end;
  });
  if (gap < piece.size()) st.push_back({gap, piece.size(), false});
  if (step.invert)
    for (Stretch& s : st) s.match = !s.match;
  // The folds below follow HF's NormalizedString::split stretch by stretch, including
  // its treatment of adjacent matches, so that every behavior cuts where HF does.
  size_t first = 0, last = st.size();
  bool previous = false;
  switch (step.behavior) {
    case SplitBehavior::Removed:
    case SplitBehavior::Isolated: break;
    case SplitBehavior::Contiguous:
    case SplitBehavior::MergedWithPrevious: {
      size_t w = 0;
      for (size_t i = 0; i < st.size(); ++i) {
        const bool join = step.behavior == SplitBehavior::Contiguous ? st[i].match == previous
                                                                      : st[i].match && !previous;
        previous = st[i].match;
        if (join && w > 0) {
          st[w - 1].end = st[i].end;
          st[w - 1].match = false;
        } else {
          st[w] = st[i];
          st[w++].match = false;
        }
      }
      last = w;
      break;
    }
    case SplitBehavior::MergedWithNext: {
      size_t w = st.size();
      for (size_t i = st.size(); i-- > 0;) {
        const bool join = st[i].match && !previous;
        previous = st[i].match;
        if (join && w < st.size()) {
          st[w].begin = st[i].begin;
        } else {
          st[--w] = st[i];
          st[w].match = false;
        }
      }
      first = w;
      break;
    }
  }
  for (size_t i = first; i < last; ++i) {
    const Stretch& s = st[i];
    if (s.end == s.begin || (s.match && step.behavior == SplitBehavior::Removed)) continue;
    scratch.next.push_back(piece.substr(s.begin, s.end - s.begin));
  }
}

void PreTokenizer::run(std::string_view text, bool at_input_start, Scratch& scratch) const {
  scratch.pieces.clear();
  scratch.owned.clear();
  if (text.empty()) return;
  scratch.pieces.push_back(text);
  // Whether scratch.pieces[0] still begins where the input begins: HF's "first" prepend
  // scheme tests a piece's offset in the original text, which an earlier step that drops
  // the head of the text moves.
  bool first_at_start = at_input_start;
  for (const Step& step : steps_) {
    scratch.next.clear();
    for (size_t k = 0; k < scratch.pieces.size(); ++k) {
      std::string_view piece = scratch.pieces[k];
      const bool first_piece = first_at_start && k == 0;
      switch (step.kind) {
        case Step::Kind::Split: split_piece(step, piece, scratch); break;
        case Step::Kind::ByteLevel:
          if (step.add_prefix_space && piece.front() != ' ') {
            piece = scratch.owned.emplace_back(" " + std::string(piece));
          }
          if (step.regex) {
            split_piece(step, piece, scratch);
          } else {
            scratch.next.push_back(piece);
          }
          break;
        case Step::Kind::Metaspace: {
          std::string& s = scratch.owned.emplace_back();
          // HF replaces spaces first and prepends only when the result does not already
          // begin with the replacement, hence the leading ' ' counts too.
          if ((step.scheme == PrependScheme::Always || (step.scheme == PrependScheme::First && first_piece)) &&
              piece.front() != ' ' && piece.substr(0, step.replacement.size()) != step.replacement) {
            s = step.replacement;
          }
          for (char c : piece) {
            if (c == ' ') {
              s += step.replacement;
            } else {
              s += c;
            }
          }
          if (!step.split) {
            scratch.next.push_back(s);
            break;
          }
          // Each replacement character starts a new piece (HF's MergedWithNext).
          const std::string_view all = s;
          size_t start = 0;
          for (size_t at = all.find(step.replacement, 1); at != std::string_view::npos;
               at = all.find(step.replacement, at + step.replacement.size())) {
            scratch.next.push_back(all.substr(start, at - start));
            start = at;
          }
          scratch.next.push_back(all.substr(start));
          break;
        }
      }
      // A step that keeps the head of piece 0 starts its first output with it; one that
      // rewrites piece 0 (Metaspace) keeps its position.
      if (k == 0)
        first_at_start = first_piece && !scratch.next.empty() &&
                         (step.kind == Step::Kind::Metaspace || scratch.next[0].data() == piece.data());
    }
    scratch.pieces.swap(scratch.next);
  }
}

}  // namespace orzo
