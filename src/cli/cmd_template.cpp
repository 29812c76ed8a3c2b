// clover template: render a chat template for an OpenAI conversation and print the prompt.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "chat/chat_template.h"
#include "chat/json_depth.h"
#include "cli/commands.h"
#include "cli/model_template.h"

namespace clover::cli {

namespace {

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

chat::json read_json_file(const std::string& path) {
  chat::json j;
  try {
    j = chat::json::parse(read_text_file(path));
  } catch (const chat::json::parse_error& e) {
    throw std::runtime_error(path + ": invalid JSON: " + e.what());
  }
  // Copies of a value recurse once per level: refuse what would overflow the stack.
  if (chat::json_depth(j) > chat::kMaxJsonDepth)
    throw std::runtime_error(path + ": nests deeper than " + std::to_string(chat::kMaxJsonDepth) + " levels");
  return j;
}

}  // namespace

Runner add_template_command(CLI::App& app) {
  struct Args {
    std::string model, template_file, messages, tools, kwargs;
    bool no_generation_prompt = false, info = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("template", "render a chat template for a conversation and print the prompt");
  auto* m = c->add_option("-m,--model", a->model, "GGUF model whose tokenizer.chat_template (and bos/eos) to use");
  auto* t = c->add_option("--template", a->template_file, "Jinja chat template file (instead of -m)");
  m->excludes(t);
  c->add_option("--messages", a->messages,
                "JSON file: an array of OpenAI messages, or a request object with messages (and tools, "
                "chat_template_kwargs)")
      ->required();
  c->add_option("--tools", a->tools, "JSON file: an array of OpenAI tools (or an object with \"tools\")");
  c->add_option("--kwargs", a->kwargs, "chat_template_kwargs as inline JSON, e.g. '{\"enable_thinking\":false}'");
  c->add_flag("--no-generation-prompt", a->no_generation_prompt, "do not append the assistant turn opening");
  c->add_flag("--info", a->info, "also report the generation prompt and whether thinking is open (on stderr)");
  return [a]() -> int {
    if (a->model.empty() == a->template_file.empty()) {
      std::fprintf(stderr, "clover template: give either -m MODEL or --template FILE\n");
      return 2;
    }
    ModelTemplate mt;
    if (!a->model.empty()) mt = read_model_template(a->model);
    else mt.source = read_text_file(a->template_file);

    chat::ChatRequest req;
    chat::json conv = read_json_file(a->messages);
    if (conv.is_object()) {
      if (conv.contains("messages")) req.messages = conv["messages"];
      if (conv.contains("tools")) req.tools = conv["tools"];
      if (conv.contains("chat_template_kwargs") && conv["chat_template_kwargs"].is_object())
        req.kwargs = conv["chat_template_kwargs"];
    } else {
      req.messages = conv;
    }
    if (!req.messages.is_array()) throw std::runtime_error(a->messages + ": no messages array");
    if (!a->tools.empty()) {
      chat::json tools = read_json_file(a->tools);
      req.tools = tools.is_object() && tools.contains("tools") ? tools["tools"] : tools;
    }
    if (!a->kwargs.empty()) {
      chat::json kw = chat::json::parse(a->kwargs, nullptr, false);
      if (!kw.is_object()) throw std::runtime_error("--kwargs must be a JSON object");
      for (auto it = kw.begin(); it != kw.end(); ++it) req.kwargs[it.key()] = it.value();
    }
    req.add_generation_prompt = !a->no_generation_prompt;

    try {
      chat::ChatTemplate tmpl(mt.source, mt.bos, mt.eos);
      chat::RenderedPrompt r = tmpl.apply(req);
      std::fwrite(r.prompt.data(), 1, r.prompt.size(), stdout);
      if (a->info) {
        std::fprintf(stderr, "generation prompt: %s\nthinking open: %s\ntyped content: %s\n",
                     chat::json(r.generation_prompt).dump().c_str(), r.thinking_open ? "yes" : "no",
                     tmpl.supports_typed_content() ? "yes" : "no");
      }
    } catch (const chat::jinja::TemplateError& e) {
      std::fprintf(stderr, "clover template: %s%s\n", e.raised ? "the template rejected the conversation: " : "",
                   e.what());
      return 1;
    }
    return 0;
  };
}

}  // namespace clover::cli
