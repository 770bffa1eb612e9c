// The chat page served at `/`: one static HTML file (chat_page.html) with its
// style and script inline, compiled into the binary by CMake (chat_page.cc.in),
// so the server needs no files and the page no external assets.
#pragma once

#include <string_view>

namespace exactly::server {

std::string_view chat_page_html();

// Where the page's one <script> element carries its nonce; chat_page_reply
// puts a fresh one there (and into its Content-Security-Policy) per reply.
inline constexpr std::string_view kChatPageNonceSlot = "CSP-NONCE";

}  // namespace exactly::server
