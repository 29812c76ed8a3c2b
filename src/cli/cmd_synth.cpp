// clover synth: write a synthetic model of the Clover architecture.
#include <chrono>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/output_path.h"
#include "runtime/memory_stats.h"
#include "quantize/mixture.h"
#include "synth/synth.h"

namespace clover::cli {

namespace {
DType parse_type(const std::string& s) {
  auto t = dtype_from_name(s);
  if (!t)
    throw std::invalid_argument("unknown type '" + s + "' (" + std::string(dtype_supported_list()) + "; or a preset: " +
                                quantize::preset_names() + ")");
  return *t;
}
model::Layout parse_layout(const std::string& s) {
  if (s == "official") return model::Layout::Official;
  if (s == "llama-clover") return model::Layout::LlamaClover;
  if (s == "qwen35moe") return model::Layout::Qwen35Moe;
  throw std::invalid_argument("unknown layout '" + s + "' (official, llama-clover, qwen35moe)");
}
}  // namespace

Runner add_synth_command(CLI::App& app) {
  struct Args {
    std::string out, preset = "tiny", type = "f32", layout = "official", embd_type, output_type, vocab_hf;
    synth::SynthConfig over;
    bool quiet = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("synth", "write a random-weight model of the Clover architecture");
  c->add_option("out", a->out, "output GGUF file")->required();
  c->add_option("--preset", a->preset, "tiny | mid | slice | clover-35b");
  c->add_option("--type", a->type, "weight type of the matrices (f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl iq4_xs q2_k q3_k q4_k q5_k q6_k) or a llama-quantize preset (Q4_K_M ...)");
  c->add_option("--embd-type", a->embd_type, "type of token_embd (default: --type)");
  c->add_option("--output-type", a->output_type, "type of output.weight (default: --type)");
  c->add_option("--layout", a->layout, "official | llama-clover | qwen35moe");
  c->add_option("--seed", a->over.seed, "random seed");
  // Overrides of the preset's dimensions (0 / empty = keep the preset's).
  auto* o = &a->over;
  struct IntOpt { const char* flag; int synth::SynthConfig::*field; const char* help; };
  static const IntOpt ints[] = {
      {"--layers", &synth::SynthConfig::n_layer, "layers"},
      {"--hidden", &synth::SynthConfig::n_embd, "hidden size"},
      {"--vocab", &synth::SynthConfig::n_vocab, "vocabulary size"},
      {"--ctx", &synth::SynthConfig::n_ctx_train, "trained context length"},
      {"--heads", &synth::SynthConfig::n_head, "attention query heads"},
      {"--kv-heads", &synth::SynthConfig::n_head_kv, "attention kv heads"},
      {"--head-dim", &synth::SynthConfig::head_dim, "attention head size"},
      {"--rope-dims", &synth::SynthConfig::n_rot, "rotary dimensions"},
      {"--gdn-k-heads", &synth::SynthConfig::gdn_k_heads, "GDN key heads"},
      {"--gdn-v-heads", &synth::SynthConfig::gdn_v_heads, "GDN value heads"},
      {"--gdn-head-dim", &synth::SynthConfig::gdn_head_dim, "GDN head size"},
      {"--conv", &synth::SynthConfig::conv_kernel, "GDN conv kernel"},
      {"--experts", &synth::SynthConfig::n_expert, "routed experts"},
      {"--experts-used", &synth::SynthConfig::n_expert_used, "experts per token"},
      {"--expert-ff", &synth::SynthConfig::n_ff_exp, "expert FFN size"},
      {"--shared-ff", &synth::SynthConfig::n_ff_shexp, "shared expert FFN size"},
      {"--block", &synth::SynthConfig::block_size, "diffusion block size"},
  };
  auto given = std::make_shared<std::vector<std::pair<const IntOpt*, int>>>();
  given->reserve(std::size(ints));  // add_option keeps pointers into it
  for (const auto& io : ints) {
    given->emplace_back(&io, 0);
    c->add_option(io.flag, given->back().second, io.help);
  }
  c->add_option("--layer-pattern", o->layer_pattern, "pattern of L (Gated DeltaNet) and F (attention), repeated; default LLLF");
  c->add_option("--threshold", o->threshold, "diffusion threshold stored in the file");
  c->add_option("--vocab-hf", a->vocab_hf, "take the vocabulary from a Hugging Face tokenizer.json");
  c->add_flag("--fuse-qkv", o->fuse_qkv, "write attention q/k/v as one attn_qkv tensor");
  c->add_flag("--fuse-gate-up", o->fuse_gate_up, "write ffn_gate_up_exps instead of gate and up");
  c->add_flag("--tie", o->tie_output, "no output.weight: the head reuses token_embd");
  c->add_flag("--no-recurrent-layers-key", [o](int64_t) { o->recurrent_key = false; }, "write only full_attention_interval");
  c->add_flag("-q,--quiet", a->quiet, "no progress output");
  a->over.layer_pattern.clear();
  a->over.threshold = -1.f;
  return [a, given, c] {
    synth::SynthConfig cfg = synth::preset(a->preset);
    for (const auto& [io, v] : *given)
      if (c->count(io->flag)) cfg.*(io->field) = v;
    if (!a->over.layer_pattern.empty()) cfg.layer_pattern = a->over.layer_pattern;
    if (a->over.threshold >= 0) cfg.threshold = a->over.threshold;
    cfg.seed = a->over.seed;
    cfg.fuse_qkv = a->over.fuse_qkv;
    cfg.fuse_gate_up = a->over.fuse_gate_up;
    cfg.tie_output = a->over.tie_output;
    cfg.recurrent_key = a->over.recurrent_key;
    if (quantize::preset_from_name(a->type)) {
      cfg.mixture = a->type;  // the matrices are planned in F32, then typed by the preset's rules
    } else {
      cfg.type = parse_type(a->type);
    }
    if (!a->embd_type.empty()) cfg.embd_type = parse_type(a->embd_type), cfg.embd_type_set = true;
    if (!a->output_type.empty()) cfg.output_type = parse_type(a->output_type), cfg.output_type_set = true;
    cfg.layout = parse_layout(a->layout);
    cfg.vocab_hf_json = a->vocab_hf;
    check_output_path(a->out);
    const auto t0 = std::chrono::steady_clock::now();
    int last_pct = -1;
    synth::write_model(cfg, a->out, [&](uint64_t done, uint64_t total) {
      if (a->quiet || total == 0) return;
      const int pct = static_cast<int>(100.0 * done / total);
      if (pct != last_pct) {
        last_pct = pct;
        std::fprintf(stderr, "\rsynth: %3d%% (%.1f / %.1f MiB)", pct, done / 1048576.0, total / 1048576.0);
      }
    });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!a->quiet)
      std::fprintf(stderr, "\rsynth: wrote %s in %.1f s, peak memory %.1f MiB\n", a->out.c_str(), secs, peak_rss_bytes() / 1048576.0);
    return 0;
  };
}

}  // namespace clover::cli
