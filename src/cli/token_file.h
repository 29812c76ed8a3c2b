// Token-id lists given on the command line as JSON files (`[1, 2, 3]`).
#pragma once
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "clover/clover.h"

namespace clover::cli {

// Reads a JSON array of integer token ids; throws Error naming the file and the problem.
inline std::vector<int32_t> read_token_file(const std::string& path, bool allow_empty = false) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open " + path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error(path + ": " + e.what());
  }
  if (!j.is_array() || (j.empty() && !allow_empty)) throw Error(path + ": expected a non-empty JSON array of token ids");
  std::vector<int32_t> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer()) throw Error(path + ": token ids must be integers");
    ids.push_back(v.get<int32_t>());
  }
  return ids;
}

}  // namespace clover::cli
