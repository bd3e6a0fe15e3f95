// Parses tokenizer.json with a SAX pass: everything becomes a JSON DOM except
// model.vocab and model.merges, which go straight into flat vectors (they are
// most of the file, and a DOM of them costs more than the BPE tables built from them).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/components.h"

namespace ingot::tok {

struct BpeTables {
  bool has_vocab = false, has_merges = false;
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // legacy "a b" entries split at the space
  std::vector<std::string> bad_merges;                      // legacy entries that are not two tokens
};

// Throws Error(BadFormat) with the parser's message.
json parse_tokenizer_json(const std::string& text, BpeTables* tables);

}  // namespace ingot::tok
