// The web page (`GET /`): chat, reasoning, tool calls and the live block view, served from assets
// compiled into the binary (src/server/webui/, embedded by embed_webui.cmake). `--no-webui` turns
// it off. The page is static: it talks to the same OpenAI API as any client, with the API key the
// user gives it, so it needs no authentication of its own.
#pragma once
#include <cstddef>
#include <string_view>
#include <vector>

namespace httplib {
class Server;
}

namespace clover::server {

struct WebAsset {
  std::string_view path;          // as requested, e.g. "/webui/app.js"
  std::string_view content_type;
  const unsigned char* data;
  size_t size;
};

// Every embedded asset (the generated webui_assets.cpp).
const std::vector<WebAsset>& web_assets();

// GET / (the page) and GET /webui/<asset>.
void register_webui(httplib::Server& http);

}  // namespace clover::server
