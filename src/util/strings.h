// Small string helpers shared by the CLI, io and server.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ingot {

std::vector<std::string> split(std::string_view s, char sep);
std::string_view trim(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);
// Parses "1,2,3" (spaces allowed); throws InvalidArgument naming `what`.
std::vector<int32_t> parse_int_list(std::string_view s, std::string_view what);
std::string read_text_file(const std::string& path);
// Writes through a temp file and a rename: readers see the old or the new text.
void write_text_file_atomic(const std::string& path, const std::string& text);
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);

}  // namespace ingot
