// Where `clover run` and `clover serve` find their model when -m is not given: $CLOVER_MODEL, else
// models/default.gguf next to the binary (the build writes it there).
#include <cstdlib>
#include <filesystem>
#include <string>

namespace clover::cli {

std::string default_model_path() {
  if (const char* env = std::getenv("CLOVER_MODEL"); env && *env) return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "models/default.gguf";
  return (exe.parent_path() / "models" / "default.gguf").string();
}

}  // namespace clover::cli
