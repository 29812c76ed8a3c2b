#include "text/token_attrs.h"

#include <algorithm>
#include <set>
#include <string_view>

namespace clover::text {
namespace {

uint32_t attr_from_type(int32_t type) {
  switch (type) {
    case int32_t(TokenType::Normal):
      return kAttrNormal;
    case int32_t(TokenType::Unknown):
      return kAttrUnknown;
    case int32_t(TokenType::Control):
      return kAttrControl;
    case int32_t(TokenType::UserDefined):
      return kAttrUserDefined;
    case int32_t(TokenType::Unused):
      return kAttrUnused;
    case int32_t(TokenType::Byte):
      return kAttrByte;
    default:
      return kAttrUndefined;
  }
}

bool is_one_of(std::string_view s, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// Texts llama.cpp v0.5.0 (llama_vocab::impl::load) recognises as fill-in-the-middle tokens.
bool is_fim_text(std::string_view t) {
  return is_one_of(
      t, {"<|fim_prefix|>",  "<fim-prefix>",  "<fim_prefix>",    "<｜fim▁begin｜>", "<PRE>",           "▁<PRE>",
          "<|code_prefix|>", "<|prefix|>",    "<|fim_suffix|>",  "<fim-suffix>",    "<fim_suffix>",    "<｜fim▁hole｜>",
          "<SUF>",           "▁<SUF>",        "<|code_suffix|>", "<|suffix|>",      "<|fim_middle|>",  "<fim-middle>",
          "<fim_middle>",    "<｜fim▁end｜>", "<MID>",           "▁<MID>",          "<|code_middle|>", "<|middle|>",
          "<|fim_pad|>",     "<fim-pad>",     "<fim_pad>",       "<PAD>",           "[PAD]",           "<|fim_repo|>",
          "<|repo_name|>",   "<fim-repo>",    "<REPO>",          "<reponame>",      "<|file_sep|>"});
}
// The FIM kinds llama.cpp also counts as end of generation (pad, repo, file separator).
bool is_eog_fim_text(std::string_view t) {
  return is_one_of(t, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>",
                       "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>"});
}
bool is_eot_text(std::string_view t) {
  return is_one_of(t, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
                       "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>", "<|eom_id|>"});
}
bool is_eog_text(std::string_view t) {
  return is_eot_text(t) || is_one_of(t, {"<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "</s>", "[EOS]", "<eos>",
                                         "<turn|>", "<|tool_response>", "[e~["});
}

}  // namespace

DerivedAttrs derive_token_attrs(const VocabData& data, const std::vector<std::string>& texts) {
  const size_t n = texts.size();
  DerivedAttrs d;
  d.attr.assign(n, kAttrNormal);
  if (!data.types.empty()) {
    for (size_t i = 0; i < n; ++i) d.attr[i] = attr_from_type(data.types[i]);
  }
  std::set<int32_t> eog;
  // llama.cpp promotes the first match per kind only (hash-map order); a vocabulary has at most one
  // text per kind in practice, so promoting every match is the same thing.
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = texts[i];
    if (is_fim_text(t) || is_eog_text(t)) d.attr[i] |= kAttrControl;
    if (is_eog_text(t) || is_eog_fim_text(t)) eog.insert(int32_t(i));
  }
  for (size_t i = 0; i < n; ++i) {
    if ((d.attr[i] & kAttrControl) && texts[i].find("unused") != std::string::npos) d.attr[i] |= kAttrUnused;
    // gpt-oss: always rendered, never control.
    if (is_one_of(texts[i], {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})) {
      d.attr[i] = kAttrUserDefined;
    }
  }
  for (int32_t id : {data.eos, data.eot}) {
    if (id >= 0 && size_t(id) < n) eog.insert(id);
  }
  // Harmony / solar-open: "<|end|>" is not end of generation when "<|return|>"+"<|call|>" (or
  // "<|calls|>"+"<|flush|>") are; gemma4: "</s>" is not when "<|tool_response>" is.
  auto eog_id_of = [&](std::string_view t) -> int32_t {
    for (int32_t id : eog) {
      if (texts[size_t(id)] == t) return id;
    }
    return -1;
  };
  bool has_call = eog_id_of("<|call|>") >= 0 || eog_id_of("<|calls|>") >= 0;
  int32_t end_id = eog_id_of("<|end|>");
  if (end_id >= 0 && has_call && (eog_id_of("<|return|>") >= 0 || eog_id_of("<|flush|>") >= 0)) {
    eog.erase(end_id);
    d.attr[size_t(end_id)] = kAttrUserDefined;
  }
  int32_t s_id = eog_id_of("</s>");
  if (s_id >= 0 && eog_id_of("<|tool_response>") >= 0) {
    eog.erase(s_id);
    d.attr[size_t(s_id)] = kAttrNormal;
  }
  d.eog.assign(eog.begin(), eog.end());
  return d;
}

}  // namespace clover::text
