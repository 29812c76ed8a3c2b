// The `clover` binary's subcommands. Each add_*_command registers its options on the app and
// returns the function to run when that subcommand was chosen (it returns the exit code).
// Subcommands are clients of the engine API (include/clover/clover.h) or of one library below it;
// none reaches into another subcommand.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace clover::cli {

using Runner = std::function<int()>;

Runner add_run_command(CLI::App& app);       // generate text
Runner add_logits_command(CLI::App& app);    // dump raw logits for token ids
Runner add_tokenize_command(CLI::App& app);  // text -> token ids
Runner add_inspect_command(CLI::App& app);   // layout, hyperparameters, tensors
Runner add_synth_command(CLI::App& app);     // write a synthetic model
Runner add_patch_command(CLI::App& app);     // official Clover GGUF -> a file llama.cpp loads
Runner add_template_command(CLI::App& app);  // render a chat template
Runner add_parse_command(CLI::App& app);     // parse model output into an OpenAI message
Runner add_serve_command(CLI::App& app);     // OpenAI-compatible HTTP server
Runner add_vocab_command(CLI::App& app);     // train a BPE vocabulary / tokenise a batch
Runner add_bench_command(CLI::App& app);     // prompt / generation throughput (like llama-bench)
Runner add_devices_command(CLI::App& app);   // list the CPU and the Vulkan devices
Runner add_quantize_command(CLI::App& app);  // requantise a GGUF file with a llama-quantize preset

}  // namespace clover::cli
