#pragma once
// The chat page `orzo serve` answers at / (server/webui/chat.html, compiled into the binary by
// cmake/embed_text.cmake): a conversation streamed through /v1/chat/completions.
#include <string_view>

namespace orzo {

std::string_view chat_page_html();

}  // namespace orzo
