// `ingot run`'s conversation state: slash commands, settings and their
// ranges, the turns the chat template sees, and /save.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/chat_session.h"
#include "util/error.h"

namespace ingot::cli {
namespace {

using K = ChatCommand::Kind;

TEST(ChatLine, CommandsAndMessages) {
  EXPECT_EQ(parse_chat_line("").kind, K::Empty);
  EXPECT_EQ(parse_chat_line("   \t").kind, K::Empty);
  ChatCommand say = parse_chat_line("  hello there ");
  EXPECT_EQ(say.kind, K::Say);
  EXPECT_EQ(say.arg, "  hello there ") << "a message is sent as typed";
  EXPECT_EQ(parse_chat_line("/clear").kind, K::Clear);
  ChatCommand sys = parse_chat_line("/system   You are terse.  ");
  EXPECT_EQ(sys.kind, K::System);
  EXPECT_EQ(sys.arg, "You are terse.");
  EXPECT_EQ(parse_chat_line("/system").arg, "");
  ChatCommand set = parse_chat_line("/set temp 0.7");
  EXPECT_EQ(set.kind, K::Set);
  EXPECT_EQ(set.arg, "temp 0.7");
  EXPECT_EQ(parse_chat_line("/save chat.json").arg, "chat.json");
  for (const char* bye : {"/bye", "/exit", "/quit"}) EXPECT_EQ(parse_chat_line(bye).kind, K::Exit) << bye;
  EXPECT_EQ(parse_chat_line("/?").kind, K::Help);
  EXPECT_EQ(parse_chat_line("/help").kind, K::Help);
  ChatCommand unknown = parse_chat_line("/clearr now");
  EXPECT_EQ(unknown.kind, K::Unknown);
  EXPECT_EQ(unknown.arg, "/clearr");
  EXPECT_EQ(parse_chat_line("/").kind, K::Unknown);
}

TEST(ChatSettings, FromGenerationConfig) {
  GenerationConfig g;
  ChatSettings greedy = settings_from_generation_config(g);
  EXPECT_EQ(greedy.sampling.temperature, 0.0f) << "no do_sample: greedy, as transformers' generate()";
  EXPECT_EQ(greedy.max_tokens, 0);
  g.temperature = 0.6;
  g.repetition_penalty = 1.1;
  EXPECT_EQ(settings_from_generation_config(g).sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(settings_from_generation_config(g).sampling.repetition_penalty, 1.1f);
  g.do_sample = true;
  g.top_p = 0.95;
  g.max_new_tokens = 300;
  ChatSettings s = settings_from_generation_config(g);
  EXPECT_FLOAT_EQ(s.sampling.temperature, 0.6f);
  EXPECT_FLOAT_EQ(s.sampling.top_p, 0.95f);
  EXPECT_EQ(s.sampling.top_k, 50) << "transformers' default top_k when sampling";
  EXPECT_EQ(s.max_tokens, 300);
  g.top_k = 20;
  g.min_p = 0.05;
  EXPECT_EQ(settings_from_generation_config(g).sampling.top_k, 20);
  EXPECT_FLOAT_EQ(settings_from_generation_config(g).sampling.min_p, 0.05f);
}

TEST(ChatSession, SetChangesOnlyValidValues) {
  ChatSession s(ChatSettings{}, "");
  EXPECT_NE(s.apply_set("temp 0.7").find("temp 0.7"), std::string::npos);
  EXPECT_FLOAT_EQ(s.settings().sampling.temperature, 0.7f);
  s.apply_set("top-p 0.9");
  s.apply_set("top_k 40");
  s.apply_set("min_p 0.05");
  s.apply_set("repeat_penalty 1.1");
  s.apply_set("max_tokens 128");
  s.apply_set("seed 42");
  EXPECT_FLOAT_EQ(s.settings().sampling.top_p, 0.9f);
  EXPECT_EQ(s.settings().sampling.top_k, 40);
  EXPECT_FLOAT_EQ(s.settings().sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(s.settings().sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(s.settings().max_tokens, 128);
  EXPECT_EQ(s.settings().sampling.seed, 42u);
  s.apply_set("seed random");
  EXPECT_FALSE(s.settings().sampling.seed.has_value());
  EXPECT_EQ(s.apply_set(""), s.describe_settings());
  const ChatSettings before = s.settings();
  for (const char* bad : {"temp", "temp hot", "temp -1", "temp nan", "temp 0.7x", "top_p 0", "top_p 1.5", "top_k -3",
                          "min_p 2", "repeat_penalty 0", "max_tokens -1", "seed -5", "warmth 3"}) {
    try {
      s.apply_set(bad);
      ADD_FAILURE() << "accepted /set " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument) << bad;
    }
  }
  EXPECT_FLOAT_EQ(s.settings().sampling.temperature, before.sampling.temperature) << "a refused /set changes nothing";
  EXPECT_FLOAT_EQ(s.settings().sampling.top_p, before.sampling.top_p);
  EXPECT_EQ(s.settings().max_tokens, before.max_tokens);
}

TEST(ChatSession, TurnsSystemAndClear) {
  ChatSession s(ChatSettings{}, "Be brief.");
  auto m = s.messages_with("hi");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[1]["content"], "hi");
  s.add_turn("hi", "Hello!");
  s.add_turn("and?", "More.");
  m = s.messages_with("last");
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["content"], "Hello!");
  EXPECT_EQ(m[5]["content"], "last");
  EXPECT_TRUE(s.drop_oldest_turn());
  m = s.messages_with("x");
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[1]["content"], "and?");
  s.set_system("");
  EXPECT_EQ(s.messages_with("x")[0]["role"], "user");
  s.set_system("New.");
  s.clear();
  EXPECT_EQ(s.turns(), 0u);
  EXPECT_FALSE(s.drop_oldest_turn());
  m = s.messages_with("x");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["content"], "New.") << "/clear keeps the system prompt";
}

TEST(ChatSession, SaveWritesARequestBody) {
  ChatSession s(ChatSettings{}, "sys");
  s.add_turn("hi", "héllo");
  const auto file = std::filesystem::temp_directory_path() / ("chat_session_test_" + std::to_string(::getpid()) + ".json");
  s.save(file.string(), "org/model");
  std::ifstream in(file);
  auto j = nlohmann::ordered_json::parse(in);
  std::filesystem::remove(file);
  EXPECT_EQ(j["model"], "org/model");
  ASSERT_EQ(j["messages"].size(), 3u);
  EXPECT_EQ(j["messages"][2]["content"], "héllo");
  EXPECT_THROW(s.save("/nonexistent-dir/x/chat.json", "m"), Error);
}

}  // namespace
}  // namespace ingot::cli
