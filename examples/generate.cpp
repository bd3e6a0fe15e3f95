// Streams a reply from a model through the embedded engine.
//   ingot_generate MODEL [PROMPT] [--chat] [--max-tokens N] [--ids]
// PROMPT is plain text (or, with --chat, one user message through the model's
// chat template); greedy decoding. --ids prints the generated token ids, one
// line, instead of the text.
#include <ingot/model.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

int main(int argc, char** argv) {
  std::string model, prompt = "The capital of France is";
  bool chat = false, ids = false;
  int64_t max_tokens = 32;
  int positional = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--chat") {
      chat = true;
    } else if (a == "--ids") {
      ids = true;
    } else if (a == "--max-tokens" && i + 1 < argc) {
      max_tokens = std::atoll(argv[++i]);
    } else if (positional == 0) {
      model = a, ++positional;
    } else if (positional == 1) {
      prompt = a, ++positional;
    } else {
      std::fprintf(stderr, "usage: %s MODEL [PROMPT] [--chat] [--max-tokens N] [--ids]\n", argv[0]);
      return 2;
    }
  }
  if (model.empty()) {
    std::fprintf(stderr, "usage: %s MODEL [PROMPT] [--chat] [--max-tokens N] [--ids]\n", argv[0]);
    return 2;
  }
  try {
    ingot::ModelOptions opt;
    opt.device = "cpu";
    auto m = ingot::load_model(model, opt);

    ingot::engine::Request req;
    req.prompt = chat ? m->chat_prompt({{"user", prompt}}) : m->encode(prompt, true);
    req.sampling.temperature = 0.0f;  // greedy
    req.stop.max_tokens = max_tokens;
    auto handle = m->engine().submit(req);

    ingot::engine::Chunk chunk;
    std::string ids_line;
    while (!chunk.finished) {
      if (!handle->next(&chunk, std::chrono::seconds(60))) {
        std::fprintf(stderr, "no token within a minute\n");
        return 1;
      }
      for (const auto& t : chunk.tokens) {
        if (ids)
          ids_line += (ids_line.empty() ? "" : " ") + std::to_string(t.token);
        else
          std::fputs(t.text.c_str(), stdout);
      }
      std::fflush(stdout);
    }
    if (chunk.reason == ingot::engine::FinishReason::Error) {
      std::fprintf(stderr, "generation failed: %s\n", chunk.error.c_str());
      return 1;
    }
    if (ids) std::printf("%s", ids_line.c_str());
    std::printf("\n");
    std::fprintf(stderr, "ingot %s: %lld prompt + %lld generated tokens, finish: %s\n", ingot::version(),
                 static_cast<long long>(chunk.usage.prompt_tokens),
                 static_cast<long long>(chunk.usage.completion_tokens),
                 ingot::engine::finish_reason_name(chunk.reason));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
