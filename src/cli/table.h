// Plain aligned text tables for the listing verbs (ls, cache ls).
#pragma once
#include <string>
#include <vector>

namespace ingot::cli {

// Prints rows (the first is the header) with columns padded to their widest cell.
void print_table(const std::vector<std::vector<std::string>>& rows);

}  // namespace ingot::cli
