// The chat page served at `/`: one static HTML file (chat_page.html) with its
// style and script inline, compiled into the binary by CMake (chat_page.cc.in),
// so the server needs no files and the page no external assets.
#pragma once

#include <string_view>

namespace exactly::server {

std::string_view chat_page_html();

}  // namespace exactly::server
