#pragma once
// The tokens a model may emit, as the bytes each stands for, in a trie: what a constraint's
// automaton walks to find the tokens allowed next. Built once per model and shared.
#include <cstdint>
#include <string>
#include <vector>

namespace orzo::grammar {

class Vocabulary {
 public:
  // bytes[id]: token id's bytes; special[id] != 0: a control token, which no constraint
  // allows (EOS aside); eos: the ids that end an output; size: the model's vocabulary, which
  // may run past the tokenizer's (those ids are never allowed).
  Vocabulary(const std::vector<std::string>& bytes, const std::vector<uint8_t>& special, std::vector<int32_t> eos,
             int32_t size);

  int32_t size() const { return size_; }
  const std::vector<int32_t>& eos() const { return eos_; }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  bool constrainable(int32_t id) const;  // a token a constraint can allow: not special, not empty

  // The trie: node 0 is the root; a node's children are [child_begin, child_end) and the
  // tokens spelled exactly by its path are tokens_[token_begin, token_end).
  struct Node {
    uint8_t byte = 0;
    int32_t child_begin = 0, child_end = 0;
    int32_t token_begin = 0, token_end = 0;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& node_tokens() const { return tokens_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<uint8_t> special_;
  std::vector<int32_t> eos_;
  int32_t size_;
  std::vector<Node> nodes_;
  std::vector<int32_t> tokens_;
};

}  // namespace orzo::grammar
