// Hugging Face tokenizer.json (+ tokenizer_config.json), encoded and decoded
// exactly as the Rust `tokenizers` library does.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ingot {

// Fields of tokenizer_config.json that the rest of ingot needs.
struct TokenizerConfig {
  std::string chat_template;  // the default template ("" when none)
  std::vector<std::pair<std::string, std::string>> named_templates;  // name -> source
  std::string bos_token, eos_token, pad_token, unk_token;
  std::optional<bool> add_bos_token, add_eos_token;
  int64_t model_max_length = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // dir holds tokenizer.json and optionally tokenizer_config.json (and
  // chat_template.jinja). Throws Error naming the file and the problem.
  static std::unique_ptr<Tokenizer> from_dir(const std::string& dir);
  // From file contents (config_json may be "").
  static std::unique_ptr<Tokenizer> from_json(const std::string& tokenizer_json, const std::string& config_json);

  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const = 0;
  virtual int64_t vocab_size() const = 0;  // including added tokens
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual std::string id_to_token(int32_t id) const = 0;
  virtual bool is_special(int32_t id) const = 0;
  virtual const TokenizerConfig& config() const = 0;

  // Incremental detokenizer for one sequence: push() returns only text that
  // can no longer change (never a broken UTF-8 sequence); the concatenation
  // of all pushes plus flush() equals decode(all ids).
  class Stream {
   public:
    virtual ~Stream() = default;
    virtual std::string push(int32_t id) = 0;
    virtual std::string flush() = 0;
  };
  virtual std::unique_ptr<Stream> stream(bool skip_special_tokens) const = 0;
};

}  // namespace ingot
