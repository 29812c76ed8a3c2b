// CLOVER_ARG_* environment variables, as llama.cpp's LLAMA_ARG_*: each long option of a command
// can be given as CLOVER_ARG_<NAME> (the name upper-cased, '-' as '_': --ctx-size is
// CLOVER_ARG_CTX_SIZE). A flag on the command line beats the variable (CLI11 reads the variable
// only for an option the command line did not give).
#pragma once
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace clover::cli {

inline std::string env_arg_name(const std::string& long_name) {
  std::string e = "CLOVER_ARG_";
  for (char ch : long_name) e += ch == '-' ? '_' : static_cast<char>(ch >= 'a' && ch <= 'z' ? ch - 'a' + 'A' : ch);
  return e;
}

// Gives every long option of `c` (all of them, or those named in `only`) its variable.
inline void add_env_args(CLI::App* c, const std::vector<std::string>& only = {}) {
  // CLI11 reads the variables of every subcommand without a parse-complete callback, used or not:
  // with one, only the chosen subcommand reads its own.
  c->parse_complete_callback([] {});
  for (CLI::Option* o : c->get_options()) {
    if (o->get_lnames().empty() || o->get_lnames()[0] == "help") continue;
    const std::string& name = o->get_lnames()[0];
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    o->envname(env_arg_name(name));
  }
}

// For a parse error about an option the command line did not give but the environment did: the
// variable it came from (CLI11's message names only the flag).
inline std::string env_arg_note(const CLI::App& app, const std::vector<std::string>& args, const std::string& message) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    for (const CLI::Option* o : sub->get_options()) {
      const std::string& env = o->get_envname();
      if (env.empty() || !std::getenv(env.c_str())) continue;
      const std::string flag = "--" + o->get_lnames()[0];
      if (message.find(flag) == std::string::npos) continue;
      bool on_command_line = false;
      for (const auto& a : args) on_command_line = on_command_line || a == flag || a.rfind(flag + "=", 0) == 0;
      if (!on_command_line) return "(" + flag + " came from the environment variable " + env + "=" + std::getenv(env.c_str()) + ")";
    }
  }
  return "";
}

}  // namespace clover::cli
