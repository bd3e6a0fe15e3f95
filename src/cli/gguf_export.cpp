// `ingot gguf-export MODEL.gguf DIR`: the config, tokenizer and chat template
// inside a GGUF file as Hugging Face JSON files (config.json, tokenizer.json,
// tokenizer_config.json), for tools that read those.
#include <filesystem>
#include <fstream>

#include "cli/verbs.h"
#include "io/gguf_tokenizer.h"
#include "models/gguf_source.h"
#include "util/error.h"

namespace ingot::cli {

void register_gguf_export(CLI::App& app) {
  struct Flags {
    std::string model, dir;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* sub = add_verb(app, "gguf-export", "write a GGUF file's config and tokenizer as JSON files", [f] {
    auto g = GgufFile::open(f->model);
    std::string config = gguf_config_json(*g);
    GgufTokenizerFiles tok = gguf_tokenizer_files(*g);
    namespace fs = std::filesystem;
    fs::create_directories(f->dir);
    auto write = [&](const char* name, const std::string& text) {
      std::ofstream o(fs::path(f->dir) / name);
      o << text;
      if (!o) fail(ErrorKind::Io, "cannot write ", (fs::path(f->dir) / name).string());
    };
    write("config.json", config);
    write("tokenizer.json", tok.tokenizer_json);
    write("tokenizer_config.json", tok.tokenizer_config_json);
    return 0;
  });
  sub->add_option("MODEL", f->model, "a .gguf file")->required();
  sub->add_option("DIR", f->dir, "output directory")->required();
}

}  // namespace ingot::cli
