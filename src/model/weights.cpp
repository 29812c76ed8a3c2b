#include "model/weights.h"

#include <cmath>
#include <fmt/format.h>
#include <set>

#include "gguf/gguf.h"

namespace clover::model {

namespace {

using gguf::TensorInfo;

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "{";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "}";
}

// Looks tensors up by name, checks their shapes and records which ones were used.
class Binder {
 public:
  explicit Binder(const gguf::Reader& r) : r_(r) {}

  const TensorInfo* find(const std::string& name) {
    const TensorInfo* t = r_.tensor(name);
    if (t) used_.insert(name);
    return t;
  }

  const TensorInfo& require(const std::string& name) {
    const TensorInfo* t = find(name);
    if (!t) throw ModelError(fmt::format("tensor '{}' not found", name));
    return *t;
  }

  // Shape check; trailing dimensions of 1 are ignored, as llama.cpp does.
  static void check_dims(const TensorInfo& t, const std::vector<int64_t>& want) {
    auto trim = [](std::vector<int64_t> d) {
      while (d.size() > 1 && d.back() == 1) d.pop_back();
      return d;
    };
    if (trim(t.dims) != trim(want))
      throw ModelError(fmt::format("tensor '{}' has shape {}, expected {}", t.name, dims_str(t.dims), dims_str(want)));
  }

  MatRef matrix(const std::string& name, int64_t cols, int64_t rows) {
    const TensorInfo& t = require(name);
    check_dims(t, {cols, rows});
    return mat_of(t, cols, rows);
  }

  ExpertsRef experts(const TensorInfo& t, int64_t cols, int64_t rows, int64_t n_expert) {
    check_dims(t, {cols, rows, n_expert});
    ExpertsRef e;
    e.first = mat_of(t, cols, rows);
    e.expert_stride = e.first.row_stride * static_cast<size_t>(rows);
    return e;
  }

  const float* f32(const std::string& name, std::vector<int64_t> dims) {
    const TensorInfo& t = require(name);
    check_dims(t, dims);
    if (t.type != DType::F32)
      throw ModelError(fmt::format("tensor '{}' is {}, must be F32 (as llama.cpp requires for norms, conv and 1-D tensors)",
                                   name, dtype_name(t.type)));
    return reinterpret_cast<const float*>(t.data);
  }

  std::vector<std::string> unused(int n_layer) const {
    std::vector<std::string> out;
    for (const auto& t : r_.tensors()) {
      if (used_.count(t.name)) continue;
      int blk = -1;
      if (std::sscanf(t.name.c_str(), "blk.%d.", &blk) == 1 && blk >= n_layer) continue;  // MTP layers: never run
      out.push_back(t.name);
    }
    return out;
  }

  static MatRef mat_of(const TensorInfo& t, int64_t cols, int64_t rows) {
    MatRef m;
    m.type = t.type;
    m.data = t.data;
    m.cols = cols;
    m.rows = rows;
    m.row_stride = dtype_row_bytes(t.type, cols);
    return m;
  }

 private:
  const gguf::Reader& r_;
  std::set<std::string, std::less<>> used_;
};

MatRef row_slice(const MatRef& m, int64_t row0, int64_t rows) {
  MatRef s = m;
  s.data = static_cast<const uint8_t*>(m.data) + static_cast<size_t>(row0) * m.row_stride;
  s.rows = rows;
  return s;
}

// ssm_a in the official layout holds A_log; the engine computes with -exp(A_log) (CLOVER-SPEC 3.2).
const float* decay_rates(const float* stored, int n, bool stored_as_a_log, const std::string& name, ModelWeights& w,
                         std::vector<std::string>& warnings) {
  bool all_negative = true, any_nonnegative = false;
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(stored[i])) throw ModelError(fmt::format("tensor '{}' holds a non-finite value", name));
    all_negative &= stored[i] < 0.f;
    any_nonnegative |= stored[i] >= 0.f;
  }
  if (!stored_as_a_log) {
    if (any_nonnegative)
      warnings.push_back(fmt::format("'{}' has non-negative values although this layout stores -exp(A_log) (strictly negative); "
                                     "the file may hold A_log", name));
    return stored;
  }
  if (all_negative)
    warnings.push_back(fmt::format("'{}' is all negative, as in llama.cpp's -exp(A_log) form, although the official layout "
                                   "stores A_log; converting as A_log anyway", name));
  auto buf = std::make_unique<float[]>(n);
  for (int i = 0; i < n; ++i) buf[i] = -std::exp(stored[i]);
  w.owned.push_back(std::move(buf));
  return w.owned.back().get();
}

}  // namespace

ModelWeights bind_weights(const gguf::Reader& r, HParams& hp, std::vector<std::string>& warnings) {
  Binder b(r);
  ModelWeights w;
  const int64_t E = hp.n_embd;

  // Token embedding and vocabulary size.
  const TensorInfo& embd = b.require("token_embd.weight");
  if (embd.dims.size() != 2 || embd.dims[0] != E)
    throw ModelError(fmt::format("tensor 'token_embd.weight' has shape {}, expected {{{}, n_vocab}}", dims_str(embd.dims), E));
  if (hp.n_vocab == 0) hp.n_vocab = static_cast<int>(embd.dims[1]);
  if (embd.dims[1] != hp.n_vocab)
    throw ModelError(fmt::format("tensor 'token_embd.weight' has {} rows but the vocabulary has {} tokens", embd.dims[1], hp.n_vocab));
  w.token_embd = Binder::mat_of(embd, E, hp.n_vocab);
  w.output_norm = b.f32("output_norm.weight", {E});
  if (r.tensor("output.weight")) {
    w.output = b.matrix("output.weight", E, hp.n_vocab);
  } else {
    w.output = w.token_embd;
    w.tied_output = true;
  }

  const bool a_log_form = hp.layout == Layout::Official;
  const int64_t hd = hp.head_dim, d = hp.gdn_head_dim, Hv = hp.gdn_v_heads;
  for (int il = 0; il < hp.n_layer; ++il) {
    const std::string p = fmt::format("blk.{}.", il);
    LayerWeights L;
    L.recurrent = hp.recurrent[il];
    L.attn_norm = b.f32(p + "attn_norm.weight", {E});
    L.post_norm = b.f32(p + "post_attention_norm.weight", {E});

    if (!L.recurrent) {
      AttentionWeights& a = L.attn;
      const int64_t nq = 2 * hp.n_head * hd, nkv = hp.n_head_kv * hd;
      if (r.tensor(p + "attn_qkv.weight")) {
        MatRef qkv = b.matrix(p + "attn_qkv.weight", E, nq + 2 * nkv);
        a.q = row_slice(qkv, 0, nq);
        a.k = row_slice(qkv, nq, nkv);
        a.v = row_slice(qkv, nq + nkv, nkv);
      } else {
        a.q = b.matrix(p + "attn_q.weight", E, nq);
        a.k = b.matrix(p + "attn_k.weight", E, nkv);
        a.v = b.matrix(p + "attn_v.weight", E, nkv);
      }
      a.o = b.matrix(p + "attn_output.weight", hp.n_head * hd, E);
      a.q_norm = b.f32(p + "attn_q_norm.weight", {hd});
      a.k_norm = b.f32(p + "attn_k_norm.weight", {hd});
    } else {
      GdnWeights& g = L.gdn;
      g.qkv = b.matrix(p + "attn_qkv.weight", E, hp.gdn_qkv_dim());
      g.gate = b.matrix(p + "attn_gate.weight", E, hp.gdn_v_dim());
      g.beta = b.matrix(p + "ssm_beta.weight", E, Hv);
      g.alpha = b.matrix(p + "ssm_alpha.weight", E, Hv);
      g.out = b.matrix(p + "ssm_out.weight", hp.gdn_v_dim(), E);
      g.conv1d = b.f32(p + "ssm_conv1d.weight", {hp.conv_kernel, hp.gdn_qkv_dim()});
      g.dt_bias = b.f32(p + "ssm_dt.bias", {Hv});
      g.a = decay_rates(b.f32(p + "ssm_a", {Hv}), static_cast<int>(Hv), a_log_form, p + "ssm_a", w, warnings);
      g.norm = b.f32(p + "ssm_norm.weight", {d});
      if (hp.has_reverse_path) {
        g.rev_alpha = b.matrix(p + "ssm_rev_alpha.weight", E, Hv);
        g.rev_beta = b.matrix(p + "ssm_rev_beta.weight", E, Hv);
        g.rev_dt_bias = b.f32(p + "ssm_rev_dt.bias", {Hv});
        g.rev_a = decay_rates(b.f32(p + "ssm_rev_a", {Hv}), static_cast<int>(Hv), true, p + "ssm_rev_a", w, warnings);
      }
    }

    MoeWeights& m = L.moe;
    m.router = b.matrix(p + "ffn_gate_inp.weight", E, hp.n_expert);
    if (const TensorInfo* gu = b.find(p + "ffn_gate_up_exps.weight")) {
      if (hp.n_ff_exp == 0 && gu->dims.size() == 3) hp.n_ff_exp = static_cast<int>(gu->dims[1] / 2);
      ExpertsRef both = b.experts(*gu, E, 2 * hp.n_ff_exp, hp.n_expert);
      m.gate = both;
      m.gate.first.rows = hp.n_ff_exp;
      m.up = m.gate;
      m.up.first = row_slice(both.first, hp.n_ff_exp, hp.n_ff_exp);
    } else {
      const TensorInfo& gt = b.require(p + "ffn_gate_exps.weight");
      if (hp.n_ff_exp == 0 && gt.dims.size() == 3) hp.n_ff_exp = static_cast<int>(gt.dims[1]);
      m.gate = b.experts(gt, E, hp.n_ff_exp, hp.n_expert);
      m.up = b.experts(b.require(p + "ffn_up_exps.weight"), E, hp.n_ff_exp, hp.n_expert);
    }
    m.down = b.experts(b.require(p + "ffn_down_exps.weight"), hp.n_ff_exp, E, hp.n_expert);
    m.shared_gate_inp = b.matrix(p + "ffn_gate_inp_shexp.weight", E, 1);
    const TensorInfo& sg = b.require(p + "ffn_gate_shexp.weight");
    if (hp.n_ff_shexp == 0 && sg.dims.size() == 2) hp.n_ff_shexp = static_cast<int>(sg.dims[1]);
    m.shared_gate = b.matrix(p + "ffn_gate_shexp.weight", E, hp.n_ff_shexp);
    m.shared_up = b.matrix(p + "ffn_up_shexp.weight", E, hp.n_ff_shexp);
    m.shared_down = b.matrix(p + "ffn_down_shexp.weight", hp.n_ff_shexp, E);
    w.layers.push_back(L);
  }

  std::vector<std::string> extra = b.unused(hp.n_layer);
  if (!extra.empty()) {
    std::string list;
    for (size_t i = 0; i < extra.size() && i < 5; ++i) list += (i ? ", " : "") + extra[i];
    throw ModelError(fmt::format("{} unexpected tensor(s) for a {} file: {}{}", extra.size(), layout_name(hp.layout), list,
                                 extra.size() > 5 ? ", ..." : ""));
  }
  return w;
}

}  // namespace clover::model
