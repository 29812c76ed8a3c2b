// clover inspect: a model file's layout, hyperparameters and tensors.
#include <cstdio>
#include <fmt/format.h>
#include <map>
#include <string>

#include "cli/commands.h"
#include "gguf/gguf.h"
#include "model/hparams.h"
#include "quantize/mixture.h"

namespace clover::cli {

Runner add_inspect_command(CLI::App& app) {
  struct Args {
    std::string model;
    bool tensors = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("inspect", "print a model file's layout, hyperparameters, tensor types and sizes");
  c->add_option("model", a->model, "GGUF file")->required();
  c->add_flag("--tensors", a->tensors, "list every tensor");
  return [a] {
    auto r = gguf::Reader::open(a->model);
    std::vector<std::string> warnings;
    model::HParams hp = model::read_hparams(*r, warnings);
    std::printf("file:          %s (%.2f MiB, GGUF v%u, %zu tensors, %zu keys)\n", a->model.c_str(), r->file_size() / 1048576.0,
                r->version(), r->tensors().size(), r->metadata().size());
    std::printf("architecture:  %s\n", hp.arch.c_str());
    std::printf("layout:        %s\n", model::layout_name(hp.layout));
    std::string pattern;
    for (bool rec : hp.recurrent) pattern += rec ? 'L' : 'F';
    std::printf("layers:        %d (%d Gated DeltaNet, %d attention) pattern %s%s\n", hp.n_layer, hp.n_gdn_layers(),
                hp.n_attn_layers(), pattern.c_str(), hp.n_nextn ? fmt::format(" + {} MTP", hp.n_nextn).c_str() : "");
    std::printf("hidden:        %d, vocabulary %d, trained context %d, rms eps %g\n", hp.n_embd, hp.n_vocab, hp.n_ctx_train, hp.rms_eps);
    std::printf("attention:     %d query / %d kv heads x %d, rope %d dims theta %g sections [%d,%d,%d,%d]\n", hp.n_head,
                hp.n_head_kv, hp.head_dim, hp.n_rot, hp.rope_theta, hp.rope_sections[0], hp.rope_sections[1],
                hp.rope_sections[2], hp.rope_sections[3]);
    std::printf("gated deltanet: %d key / %d value heads x %d, conv %d\n", hp.gdn_k_heads, hp.gdn_v_heads, hp.gdn_head_dim,
                hp.conv_kernel);
    std::printf("experts:       %d, %d per token, expert FFN %d, shared FFN %d\n", hp.n_expert, hp.n_expert_used, hp.n_ff_exp,
                hp.n_ff_shexp);
    std::printf("diffusion:     block %d, threshold %g, mask token %d, reverse path %s\n", hp.block_size, hp.threshold,
                hp.mask_token, hp.has_reverse_path ? "yes" : "no");
    std::map<std::string, std::pair<size_t, uint64_t>> by_type;
    uint64_t params = 0;
    for (const auto& t : r->tensors()) {
      auto& e = by_type[std::string(dtype_name(t.type))];
      e.first++;
      e.second += t.size;
      params += static_cast<uint64_t>(t.n_elements());
    }
    std::printf("parameters:    %.3f M\n", params / 1e6);
    for (const auto& [name, e] : by_type) std::printf("  %-5s %5zu tensors %10.2f MiB\n", name.c_str(), e.first, e.second / 1048576.0);
    std::vector<quantize::TensorDesc> descs;
    for (const auto& t : r->tensors()) descs.push_back({t.name, t.dims, t.type});
    const auto preset = quantize::matching_preset(descs, hp.n_layer, hp.n_expert, hp.n_head_kv > 0 ? hp.n_head / hp.n_head_kv : 1);
    const auto ftype = r->get_u32_opt("general.file_type");
    std::printf("types:         %s (general.file_type %s)\n",
                preset ? fmt::format("those of llama-quantize's {} preset", preset->name).c_str() : "no llama-quantize preset's mixture",
                ftype ? std::to_string(*ftype).c_str() : "not set");
    if (a->tensors)
      for (const auto& t : r->tensors()) {
        std::string dims;
        for (size_t i = 0; i < t.dims.size(); ++i) dims += (i ? " x " : "") + std::to_string(t.dims[i]);
        std::printf("  %-40s %-5s %-22s %10.3f MiB\n", t.name.c_str(), std::string(dtype_name(t.type)).c_str(), dims.c_str(), t.size / 1048576.0);
      }
    for (const auto& w : warnings) std::printf("warning: %s\n", w.c_str());
    return 0;
  };
}

}  // namespace clover::cli
