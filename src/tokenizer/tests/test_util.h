// Shared helpers for the tokenizer tests: the real tokenizers and the corpus.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/strings.h"

namespace ingot::test {

inline std::string shared_tokenizer_dir(const std::string& name) {
  return std::string(INGOT_SHARED_DIR) + "/assets/tokenizers/" + name;
}

// Loaded once per test binary (the big vocabularies take a while).
inline const Tokenizer& real_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[name];
  if (!slot) slot = Tokenizer::from_dir(shared_tokenizer_dir(name));
  return *slot;
}

inline const std::vector<std::string>& corpus() {
  static std::vector<std::string> texts = [] {
    auto j = nlohmann::json::parse(read_text_file(std::string(INGOT_SOURCE_DIR) + "/tests/data/tokenizer_corpus.json"));
    return j.get<std::vector<std::string>>();
  }();
  return texts;
}

}  // namespace ingot::test
