// `ingot tokenize`: PARITY.md's contract. stdin: a JSON array of strings;
// stdout: a JSON array with the ids of each, from a directory that holds only
// the tokenizer files (or any model form --model takes: a GGUF file, a cached
// repo id, part of a local model's name). --decode runs the other way (arrays
// of ids to strings), through the streaming detokenizer with --stream.
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/model_setup.h"
#include "cli/text_model.h"
#include "cli/verbs.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace ingot::cli {

namespace {

struct TokenizeFlags {
  std::string dir;
  bool add_special = false;
  bool decode = false, skip_special = false, stream = false;
};

nlohmann::json decode_all(const Tokenizer& tok, const nlohmann::json& arrays, const TokenizeFlags& f) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (!arrays[i].is_array()) fail(ErrorKind::InvalidArgument, "stdin element ", i, " is not an array of ids");
    std::vector<int32_t> ids;
    for (const auto& v : arrays[i]) {
      if (!v.is_number_integer()) fail(ErrorKind::InvalidArgument, "stdin element ", i, " holds a non-integer id");
      ids.push_back(v.get<int32_t>());
    }
    std::string text;
    if (f.stream) {
      auto s = tok.stream(f.skip_special);
      for (int32_t id : ids) text += s->push(id);
      text += s->flush();
    } else {
      text = tok.decode(ids, f.skip_special);
    }
    out.push_back(text);
  }
  return out;
}

int run_tokenize(const TokenizeFlags& f) {
  auto tokenizer = load_tokenizer(f.dir);
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  nlohmann::json texts;
  try {
    texts = nlohmann::json::parse(input);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::InvalidArgument, "stdin is not valid JSON: ", e.what());
  }
  if (!texts.is_array()) fail(ErrorKind::InvalidArgument, "stdin must be a JSON array");
  if (f.decode) {
    std::cout << decode_all(*tokenizer, texts, f).dump() << "\n";
    return 0;
  }
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!texts[i].is_string()) fail(ErrorKind::InvalidArgument, "stdin element ", i, " is not a string");
    out.push_back(tokenizer->encode(texts[i].get_ref<const std::string&>(), f.add_special));
  }
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto f = std::make_shared<TokenizeFlags>();
  CLI::App* sub = add_verb(app, "tokenize", "encode a JSON array of strings (stdin) to token ids (stdout)",
                           [f] { return run_tokenize(*f); });
  sub->add_option("--tokenizer,--model,-m", f->dir,
                  "directory with tokenizer.json, a GGUF file, a cached repo id, or part of a local model's name")
      ->required()
      ->transform([](std::string s) { return resolve_model_arg(s); });
  sub->add_flag("--add-special", f->add_special, "add the post-processor's special tokens (e.g. BOS)");
  sub->add_flag("--decode", f->decode, "decode: stdin JSON array of id arrays -> stdout JSON array of strings");
  sub->add_flag("--skip-special", f->skip_special, "with --decode: drop special tokens");
  sub->add_flag("--stream", f->stream, "with --decode: go through the incremental detokenizer");
}

}  // namespace ingot::cli
