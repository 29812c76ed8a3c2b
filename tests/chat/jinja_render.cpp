// chat_jinja_render CONTEXT.json TEMPLATE...: renders each template file with the context and
// prints one JSON line per file ({"file","status","output"|"message"}). Used by
// tools/chat_jinja_diff.py to compare the interpreter with Python jinja2 on a fuzz corpus.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "chat/jinja/template.h"

int main(int argc, char** argv) {
  using namespace clover::chat::jinja;
  if (argc < 2) {
    std::fprintf(stderr, "usage: chat_jinja_render CONTEXT.json TEMPLATE...\n");
    return 2;
  }
  std::ifstream cf(argv[1]);
  auto ctx = nlohmann::ordered_json::parse(cf);
  for (int i = 2; i < argc; ++i) {
    std::ifstream f(argv[i], std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    nlohmann::ordered_json r = {{"file", argv[i]}};
    TemplateOptions opt;
    opt.limits.max_steps = 200000;
    opt.limits.max_output_bytes = 1 << 20;
    try {
      Template t(ss.str(), opt);
      r["output"] = t.render(ctx);
      r["status"] = "ok";
    } catch (const TemplateError& e) {
      r["status"] = e.raised ? "raised" : "error";
      r["message"] = e.what();
    }
    std::printf("%s\n", r.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
  }
  return 0;
}
