#include "text/hf_tokenizer_json.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace clover::text {
namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokenizerError("cannot open " + path);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw TokenizerError(path + ": " + e.what());
  }
}

// Regexes as they appear in tokenizer.json files.
constexpr const char* kHfQwen2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)|\\s+";
constexpr const char* kHfQwen35 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Depth-first search of the pre_tokenizer tree for the first Split regex / regex-using ByteLevel.
void scan_pre(const json& node, std::string& regex, bool& byte_level_regex) {
  if (!node.is_object()) return;
  std::string type = node.value("type", "");
  if (type == "Split" && regex.empty() && node.contains("pattern") && node["pattern"].contains("Regex")) {
    regex = node["pattern"]["Regex"].get<std::string>();
  }
  if (type == "ByteLevel" && node.value("use_regex", true)) byte_level_regex = true;
  if (node.contains("pretokenizers")) {
    for (const json& child : node["pretokenizers"]) scan_pre(child, regex, byte_level_regex);
  }
}

std::string pre_name(const json& j, const std::string& path) {
  std::string regex;
  bool byte_level_regex = false;
  if (j.contains("pre_tokenizer")) scan_pre(j["pre_tokenizer"], regex, byte_level_regex);
  if (regex == kHfQwen2) return "qwen2";
  if (regex == kHfQwen35) return "qwen35";
  if (!regex.empty()) throw TokenizerError(path + ": unsupported pre-tokenizer regex " + regex);
  // GPT-2's own ByteLevel regex is llama.cpp's "gpt2" pre-tokenizer, which is not "default".
  throw TokenizerError(path + (byte_level_regex ? ": GPT-2 ByteLevel pre-tokenizer is not supported"
                                                : ": no Split pre-tokenizer regex"));
}

bool looks_special(const std::string& t) {
  auto ends = [&](std::string_view s) {
    return t.size() >= s.size() && t.compare(t.size() - s.size(), s.size(), s) == 0;
  };
  return (t.rfind("<|", 0) == 0 && ends("|>")) || (t.rfind("<｜", 0) == 0 && ends("｜>")) ||
         (t.rfind("<unused", 0) == 0 && ends(">")) || t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]";
}

// tokenizer_config.json names special tokens as strings or {"content": ...} objects.
std::string token_name(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v["content"].get<std::string>();
  return {};
}

}  // namespace

VocabData vocab_from_hf_tokenizer_json(const std::string& path) {
  json j = read_json(path);
  if (!j.contains("model") || j["model"].value("type", "") != "BPE") {
    throw TokenizerError(path + ": model.type is not BPE");
  }
  const json& model = j["model"];
  if (!model.contains("vocab") || !model["vocab"].is_object()) throw TokenizerError(path + ": model.vocab missing");

  VocabData v;
  v.pre = pre_name(j, path);

  // Collect (id, text, type) from the vocabulary and the added tokens.
  std::vector<std::pair<std::string, int32_t>> by_id;
  int64_t max_id = -1;
  auto place = [&](int64_t id, const std::string& text, TokenType type) {
    if (id < 0 || id > (int64_t(1) << 24))
      throw TokenizerError(path + ": token id " + std::to_string(id) + " out of range");
    if (size_t(id) >= by_id.size()) by_id.resize(size_t(id) + 1, {std::string(), -1});
    by_id[size_t(id)] = {text, int32_t(type)};
    max_id = std::max(max_id, id);
  };
  for (const auto& [text, id] : model["vocab"].items()) place(id.get<int64_t>(), text, TokenType::Normal);
  if (j.contains("added_tokens")) {
    for (const json& t : j["added_tokens"]) {
      std::string text = t.at("content").get<std::string>();
      bool special = t.value("special", false) || looks_special(text);
      place(t.at("id").get<int64_t>(), text, special ? TokenType::Control : TokenType::UserDefined);
    }
  }
  v.tokens.resize(size_t(max_id + 1));
  v.types.resize(size_t(max_id + 1));
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (by_id[i].second < 0) {
      v.tokens[i] = "[PAD" + std::to_string(i) + "]";
      v.types[i] = int32_t(TokenType::Unused);
    } else {
      v.tokens[i] = by_id[i].first;
      v.types[i] = by_id[i].second;
    }
  }

  if (model.contains("merges")) {
    for (const json& m : model["merges"]) {
      if (m.is_string()) {
        v.merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2) {
        v.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      } else {
        throw TokenizerError(path + ": a merge is neither \"a b\" nor [a, b]");
      }
    }
  }

  std::filesystem::path cfg_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(cfg_path)) {
    json cfg = read_json(cfg_path.string());
    auto id_of = [&](const char* key) -> int32_t {
      if (!cfg.contains(key)) return -1;
      std::string name = token_name(cfg[key]);
      if (name.empty()) return -1;
      for (size_t i = 0; i < v.tokens.size(); ++i) {
        if (v.tokens[i] == name) return int32_t(i);
      }
      return -1;
    };
    v.bos = id_of("bos_token");
    v.eos = id_of("eos_token");
    v.pad = id_of("pad_token");
    v.add_bos = cfg.value("add_bos_token", false) && v.bos >= 0;
  }
  return v;
}

}  // namespace clover::text
