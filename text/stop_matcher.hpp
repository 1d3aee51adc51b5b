#pragma once
// Stop strings over streamed text: finds them across delta boundaries and holds back the
// text that may yet turn out to be the start of one, so a client never receives part of a
// stop string.
//
// Which match ends the text: the one that is complete first, i.e. with the earliest end
// in the whole text, since generation stops the moment a stop string is complete and what
// might follow is never produced; among matches ending at the same byte, the longest (the
// earliest start), so no part of any of them is emitted. vLLM (check_stop_strings in
// vllm/v1/engine/detokenizer.py) also stops at the first completed match when fed one
// token at a time, but breaks same-end ties by list order. The result depends only on the
// whole text, never on how it was cut into deltas. Without include_stop the output ends
// right before the match; with it, right after.
//
// All stop strings together form one Aho-Corasick automaton (a DFA over byte classes), so
// each byte costs one table step and nothing is rescanned. The automaton's state is the
// longest suffix of the text that is a prefix of some stop string, which is exactly the
// text held back (at most the longest stop string's length minus one bytes); being a
// prefix of a stop string, it need not be stored. Stop strings must be valid UTF-8, so
// when deltas are whole characters, what is released is whole characters too.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace orzo {

// Why `stop` cannot be a stop string ("must not be empty": it would match everywhere; "must
// be valid UTF-8"), or none. StopMatcher holds its strings to this, and the HTTP parser
// applies it to name the field at fault.
std::optional<std::string> stop_string_problem(std::string_view stop);

class StopMatcher {
 public:
  struct Result {
    std::string_view text;  // safe to emit now; valid until the next call
    bool stopped;           // a stop string matched: `text` is the last of the output
  };

  // Throws std::invalid_argument for a string stop_string_problem refuses. No stop strings at
  // all is fine: text passes straight on.
  explicit StopMatcher(std::vector<std::string> stops, bool include_stop = false);

  // Takes the next piece of text. Throws std::logic_error once stopped or finished: the
  // caller ends the request when `stopped` comes back.
  Result push(std::string_view delta);

  // Ends the text without a match, releasing what was held back (empty once stopped).
  std::string_view finish();

  bool stopped() const { return matched_ >= 0; }
  // Index in the constructor's list of the stop string that matched, or -1.
  int32_t matched() const { return matched_; }

 private:
  // The first `length` bytes of held text plus delta, into out_.
  void release(std::string_view held, std::string_view delta, size_t length);
  std::string_view held_text() const;

  std::vector<std::string> stops_;
  bool include_stop_;
  // The automaton. Node 0 is the root (nothing held). For node v: depth_[v] is the length
  // of the prefix it stands for, of stop string owner_[v]; match_len_[v] is the length of
  // the longest stop string that is a suffix of it (0: none), that stop being
  // match_stop_[v]; next_[v * num_classes_ + byte_class_[b]] is the node after byte b.
  std::vector<uint16_t> byte_class_;
  uint32_t num_classes_ = 1;
  std::vector<uint32_t> next_, depth_, owner_, match_len_;
  std::vector<int32_t> match_stop_;

  uint32_t state_ = 0;
  int32_t matched_ = -1;
  bool finished_ = false;
  std::string out_;
};

}  // namespace orzo
