#include "vocab_gguf_writer.h"

#include "gguf/gguf.h"

namespace clover::text::testing {

void write_vocab_gguf(const VocabData& v, const std::string& path) {
  using gguf::Value;
  gguf::Writer w(path);
  const std::string a = "qwen35moe.";
  w.set("general.architecture", Value::str("qwen35moe"));
  w.set("general.name", Value::str("clover tokenizer oracle (vocab only)"));
  // Required hyperparameters (reference doc §2); values match a tiny LLLF model.
  w.set(a + "context_length", Value::u32(4096));
  w.set(a + "embedding_length", Value::u32(128));
  w.set(a + "block_count", Value::u32(4));
  w.set(a + "expert_count", Value::u32(8));
  w.set(a + "expert_used_count", Value::u32(2));
  w.set(a + "expert_feed_forward_length", Value::u32(64));
  w.set(a + "expert_shared_feed_forward_length", Value::u32(96));
  w.set(a + "attention.head_count", Value::u32(4));
  w.set(a + "attention.head_count_kv", Value::u32(2));
  w.set(a + "attention.key_length", Value::u32(64));
  w.set(a + "attention.value_length", Value::u32(64));
  w.set(a + "attention.layer_norm_rms_epsilon", Value::f32(1e-6f));
  w.set(a + "rope.dimension_count", Value::u32(16));
  w.set(a + "rope.freq_base", Value::f32(1e7f));
  w.set(a + "rope.dimension_sections", Value::i32_array({3, 3, 2, 0}));
  w.set(a + "ssm.conv_kernel", Value::u32(4));
  w.set(a + "ssm.inner_size", Value::u32(128));
  w.set(a + "ssm.state_size", Value::u32(32));
  w.set(a + "ssm.time_step_rank", Value::u32(4));
  w.set(a + "ssm.group_count", Value::u32(2));
  w.set(a + "full_attention_interval", Value::u32(4));

  w.set("tokenizer.ggml.model", Value::str("gpt2"));
  w.set("tokenizer.ggml.pre", Value::str(v.pre));
  w.set("tokenizer.ggml.tokens", Value::str_array(v.tokens));
  std::vector<int32_t> types = v.types;
  if (types.empty()) types.assign(v.tokens.size(), int32_t(TokenType::Normal));
  w.set("tokenizer.ggml.token_type", Value::i32_array(types));
  w.set("tokenizer.ggml.merges", Value::str_array(v.merges));
  if (v.bos >= 0) w.set("tokenizer.ggml.bos_token_id", Value::u32(uint32_t(v.bos)));
  if (v.eos >= 0) w.set("tokenizer.ggml.eos_token_id", Value::u32(uint32_t(v.eos)));
  if (v.eot >= 0) w.set("tokenizer.ggml.eot_token_id", Value::u32(uint32_t(v.eot)));
  if (v.pad >= 0) w.set("tokenizer.ggml.padding_token_id", Value::u32(uint32_t(v.pad)));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(v.add_bos));
  w.finish();
}

}  // namespace clover::text::testing
