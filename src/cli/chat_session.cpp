#include "cli/chat_session.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "sampling/sampler.h"
#include "util/error.h"
#include "util/strings.h"

namespace ingot::cli {

namespace {

// The whole of `text` as a number, or InvalidArgument naming the setting.
template <typename T>
T parse_number(std::string_view text, std::string_view key) {
  T v{};
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end)
    fail(ErrorKind::InvalidArgument, "/set ", key, ": '", text, "' is not a number");
  return v;
}

std::string format_number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

ChatSettings settings_from_generation_config(const GenerationConfig& g) {
  ChatSettings s;
  s.sampling.temperature = 0;
  if (g.do_sample) {
    s.sampling.temperature = static_cast<float>(g.temperature.value_or(1.0));
    s.sampling.top_p = static_cast<float>(g.top_p.value_or(1.0));
    s.sampling.top_k = static_cast<int>(g.top_k.value_or(50));
    s.sampling.min_p = static_cast<float>(g.min_p.value_or(0.0));
  }
  s.sampling.repetition_penalty = static_cast<float>(g.repetition_penalty.value_or(1.0));
  if (g.max_new_tokens && *g.max_new_tokens > 0) s.max_tokens = *g.max_new_tokens;
  return s;
}

ChatCommand parse_chat_line(std::string_view line) {
  std::string_view t = trim(line);
  ChatCommand c;
  if (t.empty()) return c;
  if (t[0] != '/') {
    c.kind = ChatCommand::Kind::Say;
    c.arg = std::string(line);
    return c;
  }
  const size_t sp = t.find_first_of(" \t");
  const std::string_view name = t.substr(0, sp);
  const std::string arg = sp == std::string_view::npos ? "" : std::string(trim(t.substr(sp)));
  using K = ChatCommand::Kind;
  static const std::pair<std::string_view, K> kNames[] = {
      {"/clear", K::Clear}, {"/system", K::System}, {"/set", K::Set},   {"/save", K::Save},
      {"/help", K::Help},   {"/?", K::Help},        {"/bye", K::Exit},  {"/exit", K::Exit},
      {"/quit", K::Exit}};
  for (const auto& [n, k] : kNames)
    if (name == n) {
      c.kind = k;
      c.arg = arg;
      return c;
    }
  c.kind = K::Unknown;
  c.arg = std::string(name);
  return c;
}

std::string chat_help() {
  return "/clear              forget the conversation (the system prompt stays)\n"
         "/system TEXT        set the system prompt (/system alone removes it)\n"
         "/set KEY VALUE      temp, top_p, top_k, min_p, repeat_penalty, max_tokens (0: as the context allows),\n"
         "                    seed (a number, or 'random'); /set alone shows them\n"
         "/save FILE          write the conversation as JSON ({\"model\", \"messages\"})\n"
         "/bye                exit (also Ctrl-D)\n"
         "Ctrl-C stops an answer; at an empty prompt, a second Ctrl-C exits.\n";
}

nlohmann::ordered_json ChatSession::messages_with(const std::string& user) const {
  nlohmann::ordered_json m = nlohmann::ordered_json::array();
  if (!system_.empty()) m.push_back({{"role", "system"}, {"content", system_}});
  for (const auto& [u, a] : turns_) {
    m.push_back({{"role", "user"}, {"content", u}});
    m.push_back({{"role", "assistant"}, {"content", a}});
  }
  m.push_back({{"role", "user"}, {"content", user}});
  return m;
}

void ChatSession::add_turn(std::string user, std::string answer) {
  turns_.emplace_back(std::move(user), std::move(answer));
}

bool ChatSession::drop_oldest_turn() {
  if (turns_.empty()) return false;
  turns_.erase(turns_.begin());
  return true;
}

std::string ChatSession::apply_set(std::string_view args) {
  args = trim(args);
  if (args.empty()) return describe_settings();
  const size_t sp = args.find_first_of(" \t");
  if (sp == std::string_view::npos) fail(ErrorKind::InvalidArgument, "/set ", args, ": give a value (/set KEY VALUE)");
  std::string key(args.substr(0, sp));
  for (char& ch : key)
    if (ch == '-') ch = '_';
  const std::string_view value = trim(args.substr(sp));
  ChatSettings next = settings_;
  engine::SamplingParams& s = next.sampling;
  if (key == "temp" || key == "temperature") {
    s.temperature = parse_number<float>(value, key);
  } else if (key == "top_p") {
    s.top_p = parse_number<float>(value, key);
  } else if (key == "top_k") {
    s.top_k = parse_number<int>(value, key);
  } else if (key == "min_p") {
    s.min_p = parse_number<float>(value, key);
  } else if (key == "repeat_penalty" || key == "repetition_penalty") {
    s.repetition_penalty = parse_number<float>(value, key);
  } else if (key == "max_tokens" || key == "num_predict") {
    next.max_tokens = parse_number<int64_t>(value, key);
    if (next.max_tokens < 0) fail(ErrorKind::InvalidArgument, "/set max_tokens must be >= 0 (0: as the context allows)");
  } else if (key == "seed") {
    if (value == "random") s.seed.reset();
    else s.seed = parse_number<uint64_t>(value, key);
  } else {
    fail(ErrorKind::InvalidArgument, "/set: unknown setting '", key,
         "' (temp, top_p, top_k, min_p, repeat_penalty, max_tokens, seed)");
  }
  sampling::validate(s, 1);  // the engine's own ranges, checked before any request carries them
  settings_ = next;
  return describe_settings();
}

std::string ChatSession::describe_settings() const {
  const engine::SamplingParams& s = settings_.sampling;
  std::string out = "temp " + format_number(s.temperature) + (s.temperature == 0 ? " (greedy)" : "");
  out += ", top_p " + format_number(s.top_p) + ", top_k " + std::to_string(s.top_k);
  out += ", min_p " + format_number(s.min_p) + ", repeat_penalty " + format_number(s.repetition_penalty);
  out += ", max_tokens " + (settings_.max_tokens > 0 ? std::to_string(settings_.max_tokens) : std::string("auto"));
  out += ", seed " + (s.seed ? std::to_string(*s.seed) : std::string("random"));
  return out;
}

nlohmann::ordered_json ChatSession::to_json(const std::string& model) const {
  nlohmann::ordered_json m = messages_with("");
  m.erase(m.size() - 1);  // the empty next turn
  return {{"model", model}, {"messages", m}};
}

void ChatSession::save(const std::string& file, const std::string& model) const {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) fail(ErrorKind::Io, "cannot write ", file);
  out << to_json(model).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  out.close();
  if (!out) fail(ErrorKind::Io, "cannot write ", file);
}

}  // namespace ingot::cli
