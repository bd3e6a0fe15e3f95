// `ingot tokenize`: PARITY.md's contract. stdin: a JSON array of strings;
// stdout: a JSON array with the ids of each, from a directory that holds only
// the tokenizer files.
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli/verbs.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace ingot::cli {

namespace {

struct TokenizeFlags {
  std::string dir;
  bool add_special = false;
};

int run_tokenize(const TokenizeFlags& f) {
  auto tokenizer = Tokenizer::from_dir(f.dir);
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  nlohmann::json texts;
  try {
    texts = nlohmann::json::parse(input);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::InvalidArgument, "stdin is not valid JSON: ", e.what());
  }
  if (!texts.is_array()) fail(ErrorKind::InvalidArgument, "stdin must be a JSON array of strings");
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
  sub->add_option("--tokenizer", f->dir, "directory with tokenizer.json")->required();
  sub->add_flag("--add-special", f->add_special, "add the post-processor's special tokens (e.g. BOS)");
}

}  // namespace ingot::cli
