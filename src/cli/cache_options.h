// The KV cache options shared by `clover run`, `logits` and `serve`, spelled as llama.cpp spells
// them (-ctk / -ctv are rewritten to the long names in main.cpp: CLI11 cannot declare them).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace clover::cli {

inline void add_cache_type_options(CLI::App* c, std::string& k, std::string& v) {
  const auto types = CLI::IsMember({"f32", "f16", "q8_0"}, CLI::ignore_case);
  c->add_option("--cache-type-k", k, "KV cache type for K: f32, f16 or q8_0 (-ctk)")->check(types)->capture_default_str();
  c->add_option("--cache-type-v", v, "KV cache type for V: f32, f16 or q8_0 (-ctv)")->check(types)->capture_default_str();
}

}  // namespace clover::cli
