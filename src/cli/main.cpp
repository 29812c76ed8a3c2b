// clover: one binary, one subcommand per job.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/env_args.h"

int main(int argc, char** argv) {
  CLI::App app{"clover.cpp: inference engine for Clover-35B-A3B and the qwen35moe architecture"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "clover 0.1.0");

  std::vector<clover::cli::Runner> runners;
  std::vector<CLI::App*> subs;
  auto add = [&](clover::cli::Runner r) {
    runners.push_back(std::move(r));
    subs.push_back(app.get_subcommands([](CLI::App*) { return true; }).back());
  };
  add(clover::cli::add_run_command(app));
  add(clover::cli::add_logits_command(app));
  add(clover::cli::add_tokenize_command(app));
  add(clover::cli::add_inspect_command(app));
  add(clover::cli::add_synth_command(app));
  add(clover::cli::add_quantize_command(app));
  add(clover::cli::add_patch_command(app));
  add(clover::cli::add_vocab_command(app));
  add(clover::cli::add_template_command(app));
  add(clover::cli::add_parse_command(app));
  add(clover::cli::add_serve_command(app));
  add(clover::cli::add_bench_command(app));
  add(clover::cli::add_devices_command(app));

  // llama.cpp spells some options with one dash and several letters, which CLI11 cannot declare:
  // accept them under their long names.
  std::vector<std::string> args(argv + 1, argv + argc);
  for (auto& a : args)
    if (a == "-np") a = "--parallel";
    else if (a == "-ctk") a = "--cache-type-k";
    else if (a == "-ctv") a = "--cache-type-v";
    else if (a == "-dev") a = "--device";
    else if (a == "-ngl") a = "--n-gpu-layers";
    else if (a == "-fa") a = "--flash-attn";
    else if (a == "-rea") a = "--reasoning";
    else if (a == "-ot") a = "--override-tensor";
    else if (a == "-cmoe") a = "--cpu-moe";
    else if (a == "-ncmoe") a = "--n-cpu-moe";
    else if (a == "--list-devices") a = "devices";  // llama.cpp's spelling
  const std::vector<std::string> given = args;
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    if (const std::string note = clover::cli::env_arg_note(app, given, e.what()); !note.empty())
      std::fprintf(stderr, "%s\n", note.c_str());
    return rc;
  }
  try {
    for (size_t i = 0; i < subs.size(); ++i)
      if (subs[i]->parsed()) return runners[i]();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
