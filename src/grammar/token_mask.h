// Token masks for structured output: the vocabulary's token bytes in a
// preorder prefix trie (built once per tokenizer), and a per-sequence
// constraint that walks the trie against the JSON automaton each step,
// pruning every subtree whose prefix the automaton rejects.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/json_automaton.h"
#include "ingot/types.h"

namespace ingot {
class Tokenizer;
}

namespace ingot::grammar {

// Token byte strings in a preorder prefix trie: node i holds byte_[i] at
// depth_[i] (1-based); its subtree ends before skip_[i]; the tokens ending
// there are ids_[tok_[i], tok_[i+1]).
struct TokenTrie {
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> skip_, tok_;
  std::vector<int32_t> ids_;
  size_t max_depth = 0;
};

class Vocabulary {
 public:
  // bytes[id] is what token id adds to the text; "" marks a token that
  // structured output never allows (special tokens).
  explicit Vocabulary(std::vector<std::string> bytes);
  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }

  TokenTrie all;  // every token with bytes
  // Inside a JSON string without a length limit a "plain" token (complete
  // UTF-8, no quote, backslash or control byte) is always allowed and keeps
  // the state; only the other tokens need the walk.
  std::vector<uint8_t> plain_in_string;
  TokenTrie not_plain;

 private:
  std::vector<std::string> bytes_;
};

// The text each token id stands for, from the tokenizer's vocabulary:
// byte-level tokens map back through the byte alphabet, SentencePiece pieces
// turn U+2581 into spaces and <0xNN> into the byte, special tokens get "".
std::vector<std::string> token_bytes(const Tokenizer& tok);

class JsonConstraint final : public engine::TokenConstraint {
 public:
  JsonConstraint(std::shared_ptr<const JsonAutomaton> automaton, std::shared_ptr<const Vocabulary> vocab);
  void apply(float* logits, int64_t vocab, int64_t tokens_left) override;
  bool accept(int32_t token) override;
  bool complete() const override;
  // Feeds the tokens' bytes on a scratch copy of the state.
  size_t allowed_prefix(const std::vector<int32_t>& tokens) override;
  // Allowed flags for the current state (for tests and the benchmark).
  const std::vector<uint8_t>& allowed(int64_t tokens_left);
  std::string text() const { return text_; }

 private:
  void keep(const Frame* top);
  void walk(const TokenTrie& trie, const Frame* cur, int64_t budget);

  std::shared_ptr<const JsonAutomaton> automaton_;
  std::shared_ptr<const Vocabulary> vocab_;
  std::vector<Frame> stack_;  // the current state, bottom first
  FrameArena scratch_;
  std::vector<const Frame*> states_;
  std::vector<uint8_t> allowed_;
  std::string text_;  // accepted so far
};

class JsonGrammar final : public engine::Grammar {
 public:
  JsonGrammar(std::shared_ptr<const Schema> schema, std::shared_ptr<const Vocabulary> vocab)
      : automaton_(std::make_shared<JsonAutomaton>(std::move(schema))), vocab_(std::move(vocab)) {}
  std::unique_ptr<engine::TokenConstraint> start() const override {
    return std::make_unique<JsonConstraint>(automaton_, vocab_);
  }

 private:
  std::shared_ptr<const JsonAutomaton> automaton_;
  std::shared_ptr<const Vocabulary> vocab_;
};

}  // namespace ingot::grammar
