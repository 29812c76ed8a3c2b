// clover parse: parse raw model output (stdin) into an OpenAI assistant message (stdout, JSON).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "chat/json_depth.h"
#include "chat/output_parser.h"
#include "cli/commands.h"

namespace clover::cli {

Runner add_parse_command(CLI::App& app) {
  struct Args {
    std::string format = "qwen35", tools, thinking = "auto";
    bool events = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("parse", "parse model output from stdin into an OpenAI assistant message");
  c->add_option("--format", a->format, "tool-call format: qwen35 (XML <function=...>) or qwen3 (JSON)")
      ->check(CLI::IsMember({"qwen35", "qwen3"}));
  c->add_option("--tools", a->tools, "JSON file: the request's tools (types XML parameter values)");
  c->add_option("--thinking", a->thinking,
                "whether the prompt left <think> open, so output starts as reasoning: on, off, or auto "
                "(on for qwen35, whose template opens it by default; off for qwen3)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  c->add_flag("--events", a->events, "print the streaming events (input fed one byte at a time) as JSON lines");
  return [a]() -> int {
    chat::ParserOptions opt;
    opt.format = a->format == "qwen3" ? chat::ToolCallFormat::Qwen3Json : chat::ToolCallFormat::Qwen35Xml;
    opt.thinking_open = a->thinking == "on" || (a->thinking == "auto" && a->format == "qwen35");
    if (!a->tools.empty()) {
      std::ifstream f(a->tools, std::ios::binary);
      if (!f) throw std::runtime_error("cannot open " + a->tools);
      std::stringstream ss;
      ss << f.rdbuf();
      nlohmann::ordered_json tools = nlohmann::ordered_json::parse(ss.str(), nullptr, false);
      if (tools.is_discarded()) throw std::runtime_error(a->tools + ": invalid JSON");
      if (chat::json_depth(tools) > chat::kMaxJsonDepth)  // copies recurse once per level
        throw std::runtime_error(a->tools + ": nests deeper than " + std::to_string(chat::kMaxJsonDepth) + " levels");
      opt.tools = tools.is_object() && tools.contains("tools") ? tools["tools"] : tools;
    }
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    const auto dump = [](const nlohmann::ordered_json& j, int indent) {
      return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    };
    chat::ParsedMessage msg;
    if (a->events) {
      static const char* kinds[] = {"reasoning", "content", "tool_call_begin", "tool_call_arguments"};
      chat::StreamParser p(opt);
      auto print = [&](const std::vector<chat::StreamEvent>& evs) {
        for (const auto& e : evs) {
          nlohmann::ordered_json j = {{"event", kinds[static_cast<int>(e.kind)]}};
          if (e.kind == chat::StreamEvent::Kind::ToolCallBegin) j.update({{"index", e.index}, {"id", e.id}, {"name", e.name}});
          else if (e.kind == chat::StreamEvent::Kind::ToolCallArguments) j.update({{"index", e.index}, {"text", e.text}});
          else j["text"] = e.text;
          std::printf("%s\n", dump(j, -1).c_str());
        }
      };
      for (char ch : text) print(p.push(std::string_view(&ch, 1)));
      print(p.finish());
      msg = p.message();
    } else {
      msg = chat::parse_output(text, opt);
    }
    std::printf("%s\n", dump(msg.to_openai(), 2).c_str());
    return 0;
  };
}

}  // namespace clover::cli
