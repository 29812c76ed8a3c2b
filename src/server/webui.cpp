#include "server/webui.h"

#include <httplib.h>

namespace clover::server {

void register_webui(httplib::Server& http) {
  for (const WebAsset& a : web_assets()) {
    const std::string path = a.path == "/webui/index.html" ? "/" : std::string(a.path);
    http.Get(path, [&a](const httplib::Request&, httplib::Response& res) {
      // The page's scripts and styles change with the binary: revalidate instead of caching.
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_content(reinterpret_cast<const char*>(a.data), a.size, std::string(a.content_type));
    });
  }
}

}  // namespace clover::server
