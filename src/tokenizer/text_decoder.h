// The engine's TextDecoder over a Tokenizer: stop strings and streamed text
// come from the tokenizer's incremental detokenizer.
#pragma once
#include <memory>

#include "ingot/types.h"
#include "tokenizer/tokenizer.h"

namespace ingot {

class TokenizerTextDecoder : public engine::TextDecoder {
 public:
  explicit TokenizerTextDecoder(std::shared_ptr<const Tokenizer> tokenizer) : tokenizer_(std::move(tokenizer)) {}

  std::unique_ptr<Stream> stream(bool skip_special) const override {
    return std::make_unique<Adapter>(tokenizer_->stream(skip_special));
  }
  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  class Adapter : public Stream {
   public:
    explicit Adapter(std::unique_ptr<Tokenizer::Stream> s) : s_(std::move(s)) {}
    std::string push(int32_t token) override { return s_->push(token); }
    std::string flush() override { return s_->flush(); }

   private:
    std::unique_ptr<Tokenizer::Stream> s_;
  };
  std::shared_ptr<const Tokenizer> tokenizer_;
};

}  // namespace ingot
