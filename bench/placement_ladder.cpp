// The memory ladder of a model's placement (backend/placement.h) for device budgets of 24, 16, 12
// and 8 GiB at two context lengths: which layers' experts stay in RAM, the device bytes and the
// RAM. From a synth preset's tensor table (no file needed: the full clover-35b shapes) or a GGUF.
//
//   placement_ladder [--preset clover-35b] [--type Q4_0] [--model FILE] [--ctk f16] [--batch 256]
#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "backend/placement.h"
#include "model/model.h"
#include "synth/synth.h"

using namespace clover;

int main(int argc, char** argv) {
  std::string preset = "clover-35b", type = "Q4_0", file, ctk = "f16";
  int batch = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--preset") preset = v;
    else if (a == "--type") type = v;
    else if (a == "--model") file = v;
    else if (a == "--ctk") ctk = v;
    else if (a == "--batch") batch = std::stoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  try {
    model::HParams hp;
    std::vector<backend::TensorSize> table;
    std::unique_ptr<model::Model> m;
    if (!file.empty()) {
      m = model::Model::load(file);
      hp = m->hp();
      table = backend::tensor_table(*m);
    } else {
      synth::SynthConfig c = synth::preset(preset);
      c.mixture = type;
      hp = synth::hparams_of(c);
      for (const synth::TensorShape& s : synth::tensor_shapes(c)) table.push_back({s.name, s.type, s.bytes()});
    }
    const DType kv = ctk == "f32" ? DType::F32 : ctk == "q8_0" ? DType::Q8_0 : DType::F16;
    uint64_t total = 0;
    for (const auto& t : table) total += t.bytes;
    std::printf("%s: %d layers, weights %.2f GiB, KV %s, passes of %d tokens\n\n", file.empty() ? (preset + " " + type).c_str() : file.c_str(),
                hp.n_layer, total / 1073741824.0, ctk.c_str(), batch);
    std::printf("| budget | context | experts in RAM | device total | weights (dense + experts) | KV | state | compute | RAM (weights + CPU scratch) |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
    auto g = [](uint64_t b) { return fmt::format("{:.2f}", b / 1073741824.0); };
    for (int64_t n_ctx : {16384, 131072})
      for (uint64_t gb : {24, 16, 12, 8}) {
        backend::PlacementRequest r;
        r.budget = gb << 30, r.n_ctx = n_ctx, r.kv = {kv, kv}, r.max_batch = batch;
        try {
          const backend::Placement p = backend::plan_placement(hp, table, r);
          // Whole layers, and the boundary layer's experts in RAM (per expert).
          std::string in_ram = fmt::format("{} of {} layers", p.n_host_layers(), hp.n_layer);
          for (int il = 0; il < hp.n_layer; ++il)
            if (const int h = p.n_host_experts(il); h > 0 && h < hp.n_expert)
              in_ram += fmt::format(" + {} of layer {}'s {} experts", h, il, hp.n_expert);
          std::printf("| %llu GiB | %lld | %s | %s | %s (%s + %s) | %s | %s | %s | %s (%s + %s) |\n",
                      static_cast<unsigned long long>(gb), static_cast<long long>(n_ctx), in_ram.c_str(),
                      g(p.device_total()).c_str(), g(p.dense_weights + p.expert_weights).c_str(), g(p.dense_weights).c_str(),
                      g(p.expert_weights).c_str(), g(p.kv).c_str(), g(p.recurrent).c_str(), g(p.compute).c_str(),
                      g(p.host_total()).c_str(), g(p.host_weights).c_str(), g(p.host_compute).c_str());
        } catch (const model::ModelError& e) {
          std::printf("| %llu GiB | %lld | refused: %s |\n", static_cast<unsigned long long>(gb), static_cast<long long>(n_ctx), e.what());
        }
      }
    // What a budget too small says.
    backend::PlacementRequest r;
    r.budget = 1ull << 30, r.n_ctx = 131072, r.kv = {kv, kv}, r.max_batch = batch;
    try {
      backend::plan_placement(hp, table, r);
    } catch (const model::ModelError& e) {
      std::printf("\n1 GiB at 131072 tokens: %s\n", e.what());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
