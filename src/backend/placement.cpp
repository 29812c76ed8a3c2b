// The placement planner (placement.h): dense parts, caches and compute buffers first, then the
// routed experts layer by layer, the last layers first.
#include "backend/placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>
#include <string_view>

#include "gguf/gguf.h"
#include "model/model.h"

namespace clover::backend {

namespace {

using model::ModelError;

// "blk.12.ffn_up_exps.weight" -> layer 12 and whether it is a routed expert tensor; -1 for a
// tensor outside the layers.
struct TensorKind {
  int layer = -1;
  bool experts = false;
};
TensorKind kind_of(const std::string& name) {
  static const std::regex blk(R"(^blk\.(\d+)\.(.*)$)");
  static const std::regex exps(R"(^ffn_(gate|up|down|gate_up)_exps\.weight$)");
  std::smatch m;
  if (!std::regex_match(name, m, blk)) return {};
  TensorKind k;
  k.layer = std::stoi(m[1].str());
  k.experts = std::regex_match(m[2].str(), exps);
  return k;
}

uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// Ranges of layers as "0-9, 12".
std::string layer_ranges(const std::vector<bool>& on) {
  std::string s;
  for (size_t i = 0; i < on.size();) {
    if (!on[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < on.size() && on[j + 1]) ++j;
    if (!s.empty()) s += ", ";
    s += i == j ? fmt::format("{}", i) : fmt::format("{}-{}", i, j);
    i = j + 1;
  }
  return s;
}

}  // namespace

std::vector<TensorSize> tensor_table(const model::Model& model) {
  std::vector<TensorSize> t;
  for (const gguf::TensorInfo& i : model.file().tensors()) t.push_back({i.name, i.type, i.size});
  return t;
}

TensorOverride parse_tensor_override(const std::string& spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw ModelError(fmt::format("-ot \"{}\": give REGEX=cpu or REGEX=vulkan (e.g. -ot \"blk\\.[0-9]\\.ffn_.*_exps=cpu\")", spec));
  TensorOverride o;
  o.pattern = spec.substr(0, eq);
  std::string where = spec.substr(eq + 1);
  std::transform(where.begin(), where.end(), where.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (where == "cpu")
    o.place = Place::Host;
  else if (where.rfind("vulkan", 0) == 0 || where == "gpu")
    o.place = Place::Device;
  else
    throw ModelError(fmt::format("-ot \"{}\": unknown place \"{}\" (cpu or vulkan)", spec, spec.substr(eq + 1)));
  try {
    std::regex r(o.pattern);
  } catch (const std::regex_error& e) {
    throw ModelError(fmt::format("-ot \"{}\": \"{}\" is not a valid regular expression ({})", spec, o.pattern, e.what()));
  }
  return o;
}

uint64_t device_bytes_of(const TensorSize& t) { return t.type == DType::BF16 ? 2 * t.bytes : t.bytes; }

// Mirrors VulkanExecutor::Scratch and its Q8 activation scratch (vulkan_executor.cpp).
uint64_t vulkan_compute_bytes(const model::HParams& hp, std::span<const TensorSize> table, int max_batch) {
  const uint64_t B = static_cast<uint64_t>(std::max(1, max_batch)), k = std::max(1, hp.n_expert_used);
  auto st = [](int64_t n) { return round_up(static_cast<uint64_t>(std::max<int64_t>(n, 1)), 64); };  // floats
  const uint64_t E = st(hp.n_embd), C = st(hp.gdn_qkv_dim()), O = st(hp.gdn_v_dim()), Hv = st(hp.gdn_v_heads);
  const uint64_t QG = st(2LL * hp.n_head * hp.head_dim), Q = st(static_cast<int64_t>(hp.n_head) * hp.head_dim);
  const uint64_t KV = st(static_cast<int64_t>(hp.n_head_kv) * hp.head_dim), NE = st(hp.n_expert);
  const uint64_t FF = st(hp.n_ff_exp), FS = st(hp.n_ff_shexp);
  uint64_t floats = 3 * B * E;  // x, h, y
  if (hp.n_gdn_layers() > 0) {
    floats += B * (2 * C + 2 * O + 2 * Hv);
    if (hp.has_reverse_path)
      floats += 2 * B * Hv + static_cast<uint64_t>(hp.gdn_v_heads) * hp.gdn_head_dim * hp.gdn_head_dim;
  }
  // Split-K attention's partials: 64 query tokens x heads x 64 chunks x (head_dim + 2)
  // (vulkan/ops.h attention_split_floats).
  if (hp.n_attn_layers() > 0)
    floats += B * (QG + 2 * Q + 2 * KV) + 64ull * hp.n_head * 64 * (static_cast<uint64_t>(hp.head_dim) + 2);
  uint64_t bytes = 0;
  bytes += static_cast<uint64_t>(hp.n_layer) * round_up(B * NE * 4, 256);  // router logits, a slice per layer
  bytes += static_cast<uint64_t>(hp.n_layer) * round_up(B * k * 4, 256);   // routing ids, a slice per layer
  floats += B * k + (2 * static_cast<uint64_t>(hp.n_expert) + 2 * B * k);  // weights, groups
  floats += 2 * B * k * FF + B * k * static_cast<uint64_t>(hp.n_embd);     // g, u, d
  floats += 2 * B * FS + B * static_cast<uint64_t>(hp.n_embd) + B;        // gs, us, ds, gamma
  floats += B * E + B * std::max(2, hp.n_rot);                             // embedding and rope rows (host-visible)
  floats += B * E + B * static_cast<uint64_t>(hp.n_vocab) + B * 64;       // the head: normed rows, logits, top
  // A denoising pass's copy of the recurrent state (one per stacked denoising pass; one counted).
  bytes += recurrent_bytes_for(hp);
  // Q8 activations: per input width and activation kind, B * k rows of a byte per value plus scales.
  bool kinds[3] = {};
  for (const TensorSize& t : table) {
    if (t.type == DType::F32 || t.type == DType::F16 || t.type == DType::BF16) continue;
    kinds[dtype_is_kquant(t.type) ? 2 : (t.type == DType::Q4_1 || t.type == DType::Q5_1) ? 1 : 0] = true;
  }
  const int n_kinds = kinds[0] + kinds[1] + kinds[2];
  // The shared expert's down input has a buffer of its own (slot 1 of its width), so it is
  // counted apart from the deduplicated widths of the other inputs.
  std::vector<int64_t> widths{hp.n_embd, hp.n_ff_exp};
  if (hp.n_gdn_layers() > 0) widths.push_back(hp.gdn_v_dim());
  if (hp.n_attn_layers() > 0) widths.push_back(static_cast<int64_t>(hp.n_head) * hp.head_dim);
  std::sort(widths.begin(), widths.end());
  widths.erase(std::unique(widths.begin(), widths.end()), widths.end());
  widths.push_back(hp.n_ff_shexp);
  for (int64_t w : widths) bytes += static_cast<uint64_t>(n_kinds) * B * k * static_cast<uint64_t>(w) * 5 / 4;
  return bytes + floats * sizeof(float);
}

int Placement::n_host_experts(int il) const {
  const std::vector<bool>& on = expert_on_host[static_cast<size_t>(il)];
  return static_cast<int>(std::count(on.begin(), on.end(), true));
}

int Placement::n_host_layers() const {
  int n = 0;
  for (size_t il = 0; il < expert_on_host.size(); ++il)
    n += !expert_on_host[il].empty() && n_host_experts(static_cast<int>(il)) == static_cast<int>(expert_on_host[il].size());
  return n;
}

int Placement::n_split_layers() const {
  int n = 0;
  for (size_t il = 0; il < expert_on_host.size(); ++il) {
    const int h = n_host_experts(static_cast<int>(il));
    n += h > 0 && h < static_cast<int>(expert_on_host[il].size());
  }
  return n;
}

bool Placement::any_on_host() const {
  for (size_t il = 0; il < expert_on_host.size(); ++il)
    if (n_host_experts(static_cast<int>(il)) > 0) return true;
  return false;
}

std::string format_gib(uint64_t bytes) {
  if (bytes < (1ull << 30)) return fmt::format("{:.1f} MiB", bytes / 1048576.0);
  return fmt::format("{:.2f} GiB", bytes / 1073741824.0);
}

std::string Placement::describe() const {
  const int n = static_cast<int>(expert_on_host.size()), h = n_host_layers();
  // GiB for a full-size model, MiB for a small one.
  const bool big = device_total() >= (1ull << 30);
  const char* unit = big ? "GiB" : "MiB";
  auto g = [big](uint64_t b) { return big ? fmt::format("{:.2f}", b / 1073741824.0) : fmt::format("{:.1f}", b / 1048576.0); };
  std::vector<bool> whole(static_cast<size_t>(n), false);
  std::string split;  // "156 of layer 10's 256 (experts 100-255)"
  int host_experts = 0, all_experts = 0;
  for (int il = cpu_layers; il < n; ++il) {
    const int ne = static_cast<int>(expert_on_host[il].size()), nh = n_host_experts(il);
    host_experts += nh, all_experts += ne;
    whole[il] = ne > 0 && nh == ne;
    if (nh == 0 || nh == ne) continue;
    split += fmt::format("{}{} of layer {}'s {} (expert{} {})", split.empty() ? "" : ", ", nh, il, ne, nh == 1 ? "" : "s",
                         layer_ranges(expert_on_host[il]));
  }
  const int nd = n - cpu_layers;  // the device's layers
  const char* dev = cpu_layers ? "device " : "";
  std::string where =
      cpu_layers == 0 ? ""
                      : fmt::format("layer{} on the CPU; ", cpu_layers == 1 ? " 0" : fmt::format("s 0-{}", cpu_layers - 1));
  if (host_experts == 0) {
    where += fmt::format("every {}layer's experts on the device ({} {}layer{})", dev, nd, dev, nd == 1 ? "" : "s");
  } else {
    const std::string ranges = layer_ranges(whole);
    if (h > 0)
      where += fmt::format("experts of layer{} {} in RAM", ranges.find_first_of(",-") == std::string::npos ? "" : "s", ranges);
    if (!split.empty()) where += h > 0 ? ", and " + split : split + " in RAM";
    if (split.empty())
      where += fmt::format(" ({} of {} {}layers)", h, nd, dev);
    else if (h == 0)
      where += fmt::format(" ({} of {} experts)", host_experts, all_experts);
    else
      where += fmt::format(" ({} of {} {}layers whole, {} of {} experts)", h, nd, dev, host_experts, all_experts);
  }
  const std::string caches = cpu_layers ? fmt::format(", CPU layers' KV and state {}", g(host_caches)) : "";
  return fmt::format("{}; device {} {}: weights {} (dense {}, experts {}), KV {}, state {}, compute {}{}; RAM {} {} "
                     "(weights {}{}, CPU expert scratch {})",
                     where, g(device_total()), unit, g(dense_weights + expert_weights), g(dense_weights), g(expert_weights), g(kv),
                     g(recurrent), g(compute), stream ? ", expert streaming " + g(stream) : "", g(host_total()), unit,
                     g(host_weights), caches, g(host_compute));
}

Placement plan_placement(const model::HParams& hp, std::span<const TensorSize> table, const PlacementRequest& req) {
  const int L = hp.n_layer, NE = std::max(1, hp.n_expert);
  if (req.n_cpu_moe < 0) throw ModelError(fmt::format("--n-cpu-moe {}: give a layer count (0 or more)", req.n_cpu_moe));
  if (req.n_seq < 1 || req.n_ctx < 1) throw ModelError("placement: at least one sequence of at least one position");
  if (req.cpu_layers < 0 || req.cpu_layers >= L)
    throw ModelError(fmt::format("placement: {} layers on the CPU of a model of {} (at least one must be on the device)",
                                 req.cpu_layers, L));
  const int k0 = req.cpu_layers;  // the first device layer
  std::vector<std::regex> res;
  for (const TensorOverride& o : req.overrides) res.emplace_back(o.pattern);

  Placement p;
  p.cpu_layers = k0;
  // The CPU's layers' entries stay false: their experts are the CPU executor's, not the device's RAM experts.
  p.expert_on_host.assign(static_cast<size_t>(L), std::vector<bool>(static_cast<size_t>(NE), false));
  std::vector<uint64_t> layer_experts(static_cast<size_t>(L), 0);  // device bytes of each layer's experts
  std::vector<uint64_t> layer_file(static_cast<size_t>(L), 0);     // and as stored in the file
  // -ot per expert: +1 device, -1 host; the budget moves only the experts no override placed.
  std::vector<std::vector<int>> forced(static_cast<size_t>(L), std::vector<int>(static_cast<size_t>(NE), 0));
  for (int il = k0; il < std::min(L, req.cpu_moe ? L : req.n_cpu_moe); ++il) p.expert_on_host[il].assign(NE, true);
  uint64_t cpu_layer_weights = 0;  // file bytes of the CPU's layers
  auto refuse_cpu_layer = [&](size_t i, const std::string& name, int il) {
    throw ModelError(fmt::format("-ot {}=vulkan matches {}, but layer {} runs on the CPU (-ngl {} puts layers {}-{} on the "
                                 "device): raise -ngl or narrow the pattern",
                                 req.overrides[i].pattern, name, il, L - k0, k0, L - 1));
  };
  bool has_output = false;
  uint64_t embd = 0, embd_dev = 0;
  std::vector<bool> matched(res.size(), false);
  for (const TensorSize& t : table) {
    if (t.name == "output.weight") has_output = true;
    if (t.name == "token_embd.weight") embd = t.bytes, embd_dev = device_bytes_of(t);
  }
  for (const TensorSize& t : table) {
    const TensorKind k = kind_of(t.name);
    if (k.layer >= L) continue;  // MTP layers: never run
    if (k.layer >= 0 && k.layer < k0) {  // a layer the CPU runs: nothing of it on the device
      for (size_t i = 0; i < res.size(); ++i) {
        if (!std::regex_search(t.name, res[i])) continue;
        matched[i] = true;
        if (req.overrides[i].place == Place::Device) refuse_cpu_layer(i, t.name, k.layer);
      }
      cpu_layer_weights += t.bytes;
      continue;
    }
    if (t.name == "token_embd.weight") continue;
    if (!k.experts) {
      for (size_t i = 0; i < res.size(); ++i) {
        if (!std::regex_search(t.name, res[i])) continue;
        matched[i] = true;
        if (req.overrides[i].place == Place::Host)
          throw ModelError(fmt::format("-ot {}=cpu matches {}: only routed expert tensors (blk.N.ffn_*_exps) can stay in "
                                       "RAM; the dense part is always on the device",
                                       req.overrides[i].pattern, t.name));
      }
      p.dense_weights += device_bytes_of(t);
      continue;
    }
    layer_experts[k.layer] += device_bytes_of(t);
    layer_file[k.layer] += t.bytes;
  }
  // Overrides in order (the last match wins): a match on an expert tensor's name moves the
  // layer's experts, one on an expert's virtual name (blk.N.ffn_up_exps.E) moves that expert.
  for (size_t i = 0; i < res.size(); ++i) {
    const int v = req.overrides[i].place == Place::Host ? -1 : 1;
    for (const TensorSize& t : table) {
      const TensorKind k = kind_of(t.name);
      if (!k.experts || k.layer >= L) continue;
      const bool whole_tensor = std::regex_search(t.name, res[i]);
      const std::string base = t.name.substr(0, t.name.size() - std::string_view(".weight").size());
      for (int e = 0; e < NE; ++e) {
        if (!whole_tensor && !std::regex_search(fmt::format("{}.{}", base, e), res[i])) continue;
        matched[i] = true;
        if (k.layer < k0) {  // the CPU runs the layer: its experts are not the device's to place
          if (v > 0) refuse_cpu_layer(i, fmt::format("{}.{}", base, e), k.layer);
          continue;
        }
        forced[k.layer][e] = v;
        p.expert_on_host[k.layer][e] = v < 0;
      }
    }
  }
  for (size_t i = 0; i < res.size(); ++i)
    if (!matched[i])
      throw ModelError(fmt::format("-ot {}: matches no tensor of this model (expert tensors are named like "
                                   "blk.0.ffn_up_exps.weight, one expert of them blk.0.ffn_up_exps.5; this model has {} "
                                   "layers of {} experts)",
                                   req.overrides[i].pattern, L, NE));
  // A file without output.weight: the head reads the token embedding, uploaded as the head.
  if (!has_output) p.dense_weights += embd_dev;
  // The caches of the device's layers (the CPU's layers keep theirs in RAM).
  int cpu_attn = 0, cpu_gdn = 0;
  for (int il = 0; il < k0; ++il) (hp.recurrent[il] ? cpu_gdn : cpu_attn) += 1;
  const uint64_t kv_all = kv_bytes_for(hp, req.n_ctx, req.kv) * static_cast<uint64_t>(req.n_seq);
  const uint64_t rec_all = recurrent_bytes_for(hp) * static_cast<uint64_t>(req.n_seq);
  const uint64_t kv_cpu = hp.n_attn_layers() ? kv_all / hp.n_attn_layers() * cpu_attn : 0;
  const uint64_t rec_cpu = hp.n_gdn_layers() ? rec_all / hp.n_gdn_layers() * cpu_gdn : 0;
  p.kv = kv_all - kv_cpu;
  p.recurrent = rec_all - rec_cpu;
  p.host_caches = kv_cpu + rec_cpu;
  p.compute = vulkan_compute_bytes(hp, table, req.max_batch);
  for (uint64_t b : layer_experts)
    if (b > p.expert_bytes_per_layer) p.expert_bytes_per_layer = b, p.expert_bytes = b / static_cast<uint64_t>(NE);

  // Every tensor of a layer holds its NE experts back to back, equal in size.
  auto each = [&](int il) { return layer_experts[il] / static_cast<uint64_t>(NE); };
  const uint64_t fixed = p.dense_weights + p.kv + p.recurrent + p.compute;
  // Streaming experts in RAM to the device takes staging for kStreamedExperts of them (the
  // largest), once any expert is in RAM.
  const uint64_t stream = req.stream_experts > 0 ? static_cast<uint64_t>(kStreamedExperts) * p.expert_bytes : 0;
  auto streaming = [&] { return p.any_on_host() ? stream : 0; };
  uint64_t device_experts = 0;
  for (int il = 0; il < L; ++il) device_experts += each(il) * static_cast<uint64_t>(NE - p.n_host_experts(il));
  if (req.budget > 0) {
    // Move layers' experts to RAM, the first device layers first, until the rest fits (experts an
    // override puts on the device stay there); then the boundary layer takes back its experts
    // 0..n-1 as long as they fit, so the budget is used to within one expert.
    std::vector<int> moved;
    int boundary = -1;
    for (int il = k0; il < L && fixed + device_experts + streaming() > req.budget; ++il) {
      for (int e = 0; e < NE; ++e) {
        if (forced[il][e] != 0 || p.expert_on_host[il][e]) continue;
        p.expert_on_host[il][e] = true;
        device_experts -= each(il);
        moved.push_back(e);
      }
      if (!moved.empty()) boundary = il;
      if (fixed + device_experts + streaming() > req.budget) moved.clear();
    }
    if (fixed + device_experts + streaming() > req.budget) {
      const uint64_t least = fixed + device_experts + streaming();
      std::string msg = fmt::format(
          "--vram-budget {} cannot hold this model: even with {} the device needs {} (dense weights {}, KV cache of {} x {} "
          "tokens {}, recurrent state {}, compute buffers for passes of {} tokens {}",
          format_gib(req.budget), device_experts ? "every expert not forced onto the device by -ot in RAM" : "every expert in RAM",
          format_gib(least), format_gib(p.dense_weights), req.n_seq, req.n_ctx, format_gib(p.kv), format_gib(p.recurrent),
          req.max_batch, format_gib(p.compute));
      if (streaming()) msg += fmt::format(", staging for streamed experts {} (--stream-experts 0: none)", format_gib(streaming()));
      if (device_experts) msg += fmt::format(", experts kept on the device by -ot {}", format_gib(device_experts));
      if (least >= (1ull << 30))
        msg += fmt::format("). Would fit: --vram-budget {:.2f}G", std::ceil(least / 1073741824.0 * 100) / 100);
      else
        msg += fmt::format("). Would fit: --vram-budget {}M", (least + (1ull << 20) - 1) >> 20);
      const uint64_t per_pos = kv_bytes_for(hp, 1, req.kv) * static_cast<uint64_t>(req.n_seq);
      const uint64_t rest = fixed - p.kv + device_experts + streaming();
      if (per_pos > 0 && req.budget > rest) {
        const int64_t n_ctx = static_cast<int64_t>((req.budget - rest) / per_pos) / 256 * 256;
        if (n_ctx > 0) msg += fmt::format(", or this budget with a context of at most {} tokens (-c {})", n_ctx, n_ctx);
      }
      if (k0 + 1 < L) msg += fmt::format(", or fewer layers on the device (-ngl {} or less)", L - k0 - 1);
      throw ModelError(msg + ".");
    }
    // `moved` holds the boundary layer's experts the budget moved, in order (none when the
    // budget moved nothing or the layer had to go whole).
    for (int e : moved) {
      if (fixed + device_experts + each(boundary) + stream > req.budget) break;
      p.expert_on_host[boundary][e] = false;
      device_experts += each(boundary);
    }
  }
  p.expert_weights = device_experts;
  p.stream = streaming();
  for (int il = k0; il < L; ++il) p.host_weights += layer_file[il] / static_cast<uint64_t>(NE) * p.n_host_experts(il);
  p.host_weights += embd + cpu_layer_weights;
  if (p.any_on_host()) {
    // The CPU expert runner: gate, up and down rows for every routed row of the largest pass, the
    // input rows and their quantised copies.
    const uint64_t rows = static_cast<uint64_t>(req.max_batch) * std::max(1, hp.n_expert_used);
    p.host_compute = rows * (2 * static_cast<uint64_t>(hp.n_ff_exp) + static_cast<uint64_t>(hp.n_embd)) * sizeof(float) +
                     static_cast<uint64_t>(req.max_batch) * hp.n_embd * (sizeof(float) + 2) +
                     rows * static_cast<uint64_t>(hp.n_ff_exp) * 2;
  }
  return p;
}

uint64_t parse_size(const std::string& s) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  std::string unit = s.substr(pos);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!unit.empty() && unit.back() == 'b') unit.pop_back();  // "8GB", "8GiB"
  if (unit.size() == 2 && unit[1] == 'i') unit.pop_back();
  double mult = 0;
  if (unit.empty()) mult = 1;
  else if (unit == "k") mult = 1024.0;
  else if (unit == "m") mult = 1024.0 * 1024;
  else if (unit == "g") mult = 1024.0 * 1024 * 1024;
  else if (unit == "t") mult = 1024.0 * 1024 * 1024 * 1024;
  if (pos == 0 || mult == 0 || !(v > 0) || !std::isfinite(v))
    throw ModelError(fmt::format("size \"{}\": give a positive number with an optional unit K, M, G or T (powers of 1024: 16G)", s));
  return static_cast<uint64_t>(v * mult);
}

}  // namespace clover::backend
