// `ingot run MODEL` (alias `ingot chat`): a chat in the terminal through the
// serving engine. Answers stream as they are generated; the conversation goes
// through the model's chat template each turn; Ctrl-C stops an answer, Ctrl-D
// exits. A non-terminal stdin is read line by line, one user turn a line.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "cli/chat_session.h"
#include "cli/line_reader.h"
#include "cli/model_fetch.h"
#include "cli/model_setup.h"
#include "cli/text_model.h"
#include "cli/verbs.h"
#include "registry/cache_layout.h"
#include "sampling/sampler.h"
#include "util/error.h"

namespace ingot::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Without --max-tokens, the oldest turns are dropped while the next answer
// would have less room than this.
constexpr int64_t kMinAnswerRoom = 256;

struct RunFlags {
  ModelFlags model;
  std::string model_arg, file, system, chat_template;
  int64_t ctx = 0;
  float temp = 0, top_p = 1, min_p = 0, repeat_penalty = 1;
  int top_k = 0;
  uint64_t seed = 0;
  int64_t max_tokens = 0;
  SpeculationFlags speculation;
  CLI::Option *temp_opt = nullptr, *top_p_opt = nullptr, *top_k_opt = nullptr, *min_p_opt = nullptr,
              *repeat_opt = nullptr, *seed_opt = nullptr, *max_tokens_opt = nullptr;
};

// Notes for the person at the terminal: stderr, dimmed on a terminal, so
// that stdout holds only the answers.
void note(const std::string& text) {
  const bool tty = isatty(STDERR_FILENO);
  std::fprintf(stderr, "%s%s%s\n", tty ? "\033[2m" : "", text.c_str(), tty ? "\033[0m" : "");
  std::fflush(stderr);
}

std::string fixed1(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

ChatSettings initial_settings(const RunFlags& f, const TextModel& tm) {
  ChatSettings s = settings_from_generation_config(tm.generation);
  if (f.temp_opt->count()) s.sampling.temperature = f.temp;
  if (f.top_p_opt->count()) s.sampling.top_p = f.top_p;
  if (f.top_k_opt->count()) s.sampling.top_k = f.top_k;
  if (f.min_p_opt->count()) s.sampling.min_p = f.min_p;
  if (f.repeat_opt->count()) s.sampling.repetition_penalty = f.repeat_penalty;
  if (f.seed_opt->count()) s.sampling.seed = f.seed;
  if (f.max_tokens_opt->count()) s.max_tokens = f.max_tokens;
  sampling::validate(s.sampling, tm.model->vocab_size());
  if (s.max_tokens < 0) fail(ErrorKind::InvalidArgument, "--max-tokens must be >= 0 (0: as the context allows)");
  return s;
}

// The prompt for `user` after the kept turns, dropping the oldest turns while
// the answer would not have room; sets *room to the tokens left to generate.
std::vector<int32_t> fit_prompt(const TextModel& tm, ChatSession& session, const std::string& user, int64_t* room) {
  const int64_t want = session.settings().max_tokens > 0 ? session.settings().max_tokens : kMinAnswerRoom;
  for (;;) {
    std::vector<int32_t> ids = tm.encode_chat(session.messages_with(user));
    *room = tm.context_length - static_cast<int64_t>(ids.size());
    if (*room >= want || (session.turns() == 0 && *room > 0)) return ids;
    if (!session.drop_oldest_turn())
      fail(ErrorKind::InvalidArgument, "the message is ", ids.size(), " tokens with the chat template, and the context ",
           "holds ", tm.context_length, " (--ctx sets it)");
    note("(the oldest turn no longer fits in the context and is left out)");
  }
}

struct Answer {
  std::string text;
  engine::FinishReason reason = engine::FinishReason::None;
};

// Streams one answer to stdout; Ctrl-C cancels it. Prints the stats line.
Answer stream_answer(const TextModel& tm, const ChatSession& session, std::vector<int32_t> prompt, int64_t room) {
  engine::Request req;
  req.prompt = std::move(prompt);
  req.sampling = session.settings().sampling;
  req.stop.max_tokens = session.settings().max_tokens > 0 ? std::min(session.settings().max_tokens, room) : room;
  Interrupts::take();  // a Ctrl-C from before this answer is not meant for it
  const auto start = Clock::now();
  auto first = start;
  auto handle = tm.engine->submit(std::move(req));
  Answer a;
  engine::Chunk c;
  bool cancelled = false;
  int64_t tokens = 0;
  for (;;) {
    if (!cancelled && Interrupts::take()) {
      handle->cancel();
      cancelled = true;
    }
    if (!handle->next(&c, std::chrono::milliseconds(50))) continue;
    for (const auto& ev : c.tokens) {
      if (tokens++ == 0) first = Clock::now();
      a.text += ev.text;
      std::fputs(ev.text.c_str(), stdout);
    }
    std::fflush(stdout);
    if (c.finished) break;
  }
  const auto end = Clock::now();
  std::fputs(a.text.empty() || a.text.back() != '\n' ? "\n" : "", stdout);
  std::fflush(stdout);
  a.reason = c.reason;
  check_chunk(c);
  const double total_s = std::chrono::duration<double>(end - start).count();
  const double decode_s = std::chrono::duration<double>(end - first).count();
  const double prefill_s = std::chrono::duration<double>(first - start).count();
  const int64_t n = c.usage.completion_tokens;
  const double rate = n > 1 && decode_s > 0 ? (n - 1) / decode_s : total_s > 0 ? n / total_s : 0;
  std::string stats = "[" + std::to_string(n) + " tokens, " + fixed1(rate) + " tok/s; prompt " +
                      std::to_string(c.usage.prompt_tokens) + " tokens";
  if (c.usage.cached_prompt_tokens > 0) stats += " (" + std::to_string(c.usage.cached_prompt_tokens) + " cached)";
  if (n > 0) stats += ", " + fixed1(prefill_s * 1000) + " ms to the first token";
  stats += "]";
  if (a.reason == engine::FinishReason::Cancelled) stats = "[stopped] " + stats;
  if (a.reason == engine::FinishReason::Length) stats = "[stopped at the token limit] " + stats;
  note(stats);
  return a;
}

// One typed line. Returns false when the session should end.
bool handle_line(const TextModel& tm, ChatSession& session, const std::string& model_name, const std::string& line) {
  const ChatCommand cmd = parse_chat_line(line);
  using K = ChatCommand::Kind;
  switch (cmd.kind) {
    case K::Empty:
      return true;
    case K::Exit:
      return false;
    case K::Help:
      std::fputs(chat_help().c_str(), stderr);
      return true;
    case K::Clear:
      session.clear();
      note("(the conversation is cleared)");
      return true;
    case K::System:
      session.set_system(cmd.arg);
      note(cmd.arg.empty() ? "(no system prompt)" : "(system prompt set)");
      return true;
    case K::Set:
      note(session.apply_set(cmd.arg));
      return true;
    case K::Save:
      if (cmd.arg.empty()) fail(ErrorKind::InvalidArgument, "/save needs a file name");
      session.save(cmd.arg, model_name);
      note("(saved " + std::to_string(session.turns()) + " turns to " + cmd.arg + ")");
      return true;
    case K::Unknown:
      fail(ErrorKind::InvalidArgument, "unknown command ", cmd.arg, " (/help lists them)");
    case K::Say:
      break;
  }
  int64_t room = 0;
  std::vector<int32_t> prompt = fit_prompt(tm, session, cmd.arg, &room);
  Answer a = stream_answer(tm, session, std::move(prompt), room);
  // A stopped answer stays in the conversation as far as it got (the user saw it).
  if (!a.text.empty()) session.add_turn(cmd.arg, a.text);
  return true;
}

int run_chat(RunFlags& f) {
  const bool interactive = isatty(STDIN_FILENO) != 0;
  f.model.requested = f.model_arg;
  f.model.model = resolve_or_fetch_model(f.model_arg, f.file);
  if (f.ctx < 0) fail(ErrorKind::InvalidArgument, "--ctx must be >= 0");
  TextModelOptions to;
  to.chat_template = f.chat_template;
  to.engine.max_concurrency = 1;
  to.engine.context_length = f.ctx;
  to.context_cap = 4096;  // a terminal chat, not a long-document job: keeps the KV cache small
  to.speculation = f.speculation;
  TextModel tm = load_text_model(f.model, to);
  if (!tm.chat_template) tm.render_chat(nlohmann::ordered_json::array());  // fails: says the model has no template
  ChatSession session(initial_settings(f, tm), f.system);
  const std::string name = registry::model_name_for_path(tm.path);
  if (interactive) {
    Interrupts::install();
    const DeviceChoice dev = resolve_device(f.model);
    note(name + ": " + session.describe_settings() + "; context " + std::to_string(tm.context_length) + " tokens; " +
         device_name(dev.device) + " (" + dev.why + ")");
    note("/help for commands, Ctrl-C stops an answer, Ctrl-D or /bye exits");
  }
  auto reader = make_line_reader(interactive);
  bool failed = false, interrupted_at_prompt = false;
  for (;;) {
    LineReader::Result r = reader->read(">>> ");
    if (r.status == LineReader::Status::End) break;
    if (r.status == LineReader::Status::Interrupted) {
      if (!r.line.empty()) continue;  // Ctrl-C dropped a half-typed line
      if (interrupted_at_prompt) break;
      interrupted_at_prompt = true;
      note("(Ctrl-C again, Ctrl-D or /bye to exit)");
      continue;
    }
    interrupted_at_prompt = false;
    try {
      if (!handle_line(tm, session, name, r.line)) break;
    } catch (const Error& e) {
      std::fprintf(stderr, "ingot: error: %s\n", e.what());
      failed = true;
    }
  }
  tm.engine->shutdown();
  return failed && !interactive ? 1 : 0;
}

}  // namespace

void register_run(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  f->model.kv = "paged";  // turns share their prefix: the engine's prefix cache keeps it
  CLI::App* sub = add_verb(app, "run", "chat with a model in the terminal (downloads a repo id first)",
                           [f] { return run_chat(*f); });
  sub->alias("chat");
  sub->add_option("model,--model,-m", f->model_arg,
                  "model directory or GGUF file, a repo id (downloaded when not cached), or part of a local model's "
                  "name")
      ->required();
  add_load_flags(sub, f->model);
  sub->add_option("--file", f->file, "with a repo id: this GGUF file of the repository");
  sub->add_option("--system", f->system, "system prompt");
  sub->add_option("--chat-template", f->chat_template, "chat template: a file or the template text");
  sub->add_option("--ctx", f->ctx, "context length in tokens (0: the model's, at most 4096)")->capture_default_str();
  f->temp_opt = sub->add_option("--temp,--temperature", f->temp, "sampling temperature (0: greedy; default: the "
                                                                 "model's generation_config.json, else greedy)");
  f->top_p_opt = sub->add_option("--top-p", f->top_p, "nucleus sampling top-p");
  f->top_k_opt = sub->add_option("--top-k", f->top_k, "top-k (0: off)");
  f->min_p_opt = sub->add_option("--min-p", f->min_p, "min-p");
  f->repeat_opt = sub->add_option("--repeat-penalty", f->repeat_penalty, "repetition penalty (1: off)");
  f->seed_opt = sub->add_option("--seed", f->seed, "sampling seed");
  f->max_tokens_opt = sub->add_option("--max-tokens", f->max_tokens, "tokens per answer (0: as the context allows)");
  add_speculation_flags(sub, f->speculation);
}

}  // namespace ingot::cli
