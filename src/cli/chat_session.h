// The state of an `ingot run` conversation and the slash commands that change
// it: turns kept for the chat template, the system prompt, sampling settings.
// No terminal and no model here; the verb feeds it lines and answers.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ingot/types.h"
#include "io/config.h"

namespace ingot::cli {

struct ChatSettings {
  engine::SamplingParams sampling;
  int64_t max_tokens = 0;  // per answer; 0: as much as the context leaves
};

// transformers' generate() defaults from generation_config.json: sampling
// only when do_sample says so (temperature, top_p, top_k 50 unless given,
// min_p), greedy otherwise; the repetition penalty and max_new_tokens either way.
ChatSettings settings_from_generation_config(const GenerationConfig& g);

// What one input line asks for.
struct ChatCommand {
  enum class Kind { Empty, Say, Clear, System, Set, Save, Help, Exit, Unknown };
  Kind kind = Kind::Empty;
  std::string arg;  // the message, system text, "KEY VALUE", file name, or the unknown command
};
ChatCommand parse_chat_line(std::string_view line);

// The commands, one a line, for /help.
std::string chat_help();

class ChatSession {
 public:
  ChatSession(ChatSettings settings, std::string system) : settings_(settings), system_(std::move(system)) {}

  const ChatSettings& settings() const { return settings_; }
  const std::string& system() const { return system_; }
  size_t turns() const { return turns_.size(); }

  // The messages for the next answer: the system prompt, the kept turns, then `user`.
  nlohmann::ordered_json messages_with(const std::string& user) const;
  void add_turn(std::string user, std::string answer);
  // Forgets the oldest user/assistant pair (it no longer fits the context); false when none is left.
  bool drop_oldest_turn();
  void clear() { turns_.clear(); }
  void set_system(std::string text) { system_ = std::move(text); }

  // "/set KEY VALUE": returns a line saying what is set now; throws
  // InvalidArgument for an unknown key or a value out of range.
  std::string apply_set(std::string_view args);
  std::string describe_settings() const;

  // {"model", "messages"}: a body that /v1/chat/completions and `ingot chat-template` take.
  nlohmann::ordered_json to_json(const std::string& model) const;
  // Writes to_json to `file`; throws Io naming the file when it cannot.
  void save(const std::string& file, const std::string& model) const;

 private:
  ChatSettings settings_;
  std::string system_;
  std::vector<std::pair<std::string, std::string>> turns_;  // user, assistant
};

}  // namespace ingot::cli
