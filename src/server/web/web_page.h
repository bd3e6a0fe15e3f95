// The chat page served at `/`, embedded in the binary at build time (plain
// HTML/CSS/JS, no network fetches: it works offline).
#pragma once
#include <string_view>

namespace ingot::server {

std::string_view chat_page_html();

}  // namespace ingot::server
