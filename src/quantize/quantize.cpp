// Streaming requantisation of a GGUF file (quantize.h).
#include "quantize/quantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/convert.h"
#include "quantize/mixture.h"
#include "runtime/thread_pool.h"

namespace clover::quantize {

namespace {

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

int hparam(const gguf::Reader& r, const std::string& arch, const char* key, int fallback) {
  const auto v = r.get_u32_opt(arch + "." + key);
  return v ? static_cast<int>(*v) : fallback;
}

}  // namespace

Summary quantize_file(const std::string& in, const std::string& out, const Options& opt) {
  const auto preset = preset_from_name(opt.preset);
  if (!preset)
    throw std::invalid_argument(fmt::format("unknown preset '{}' (supported: {}; not yet: {})", opt.preset, preset_names(),
                                            presets_not_supported()));
  auto r = gguf::Reader::open(in);
  const std::string arch = r->get_str("general.architecture");
  const int n_layer = hparam(*r, arch, "block_count", 0);
  const int n_expert = hparam(*r, arch, "expert_count", 0);
  const int n_head = hparam(*r, arch, "attention.head_count", 0), n_head_kv = hparam(*r, arch, "attention.head_count_kv", 0);
  const int n_gqa = n_head > 0 && n_head_kv > 0 ? n_head / n_head_kv : 1;

  std::vector<TensorDesc> descs;
  for (const auto& t : r->tensors()) descs.push_back({t.name, t.dims, t.type});
  const std::vector<DType> types = plan_types(*preset, descs, n_layer, n_expert, n_gqa);
  for (size_t i = 0; i < descs.size(); ++i) {
    const DType from = descs[i].type;
    if (types[i] == from || is_float(from) || (from == DType::Q8_0 && opt.allow_requantize)) continue;
    throw std::invalid_argument(fmt::format("tensor {} is already quantised ({}){}", descs[i].name, dtype_name(from),
                                            from == DType::Q8_0 ? ": pass --allow-requantize to requantise Q8_0"
                                                                : "; quantise from the F32, F16 or BF16 file"));
  }

  const auto alignment = r->get_u32_opt("general.alignment");
  gguf::Writer w(out, alignment ? *alignment : 32);
  w.set_version(r->version());
  for (const auto& [key, value] : r->metadata()) w.set(key, value);
  w.set("general.file_type", gguf::Value::u32(preset->file_type));
  w.set("general.quantization_version", gguf::Value::u32(2));
  Summary sum;
  for (size_t i = 0; i < descs.size(); ++i) {
    w.add_tensor(descs[i].name, descs[i].dims, types[i]);
    const uint64_t bytes = w.tensor_bytes(descs[i].name);
    sum.out_bytes += bytes;
    sum.in_bytes += r->tensors()[i].size;
    auto& e = sum.by_type[types[i]];
    e.first++, e.second += bytes;
  }
  w.begin_data();

  const int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool(threads);
  std::vector<float> vals;
  std::vector<uint8_t> buf;
  uint64_t done = 0;
  for (size_t i = 0; i < descs.size(); ++i) {
    const auto& t = r->tensors()[i];
    const DType from = t.type, to = types[i];
    r->prefetch(t);
    if (from == to) {  // kept as it is: bytes copied unchanged
      w.write_tensor_data(t.name, t.data, t.size);
      done += t.size;
      if (opt.progress) opt.progress(done, sum.out_bytes);
      continue;
    }
    const int64_t cols = t.dims[0], rows = t.n_elements() / cols;
    const size_t in_rb = dtype_row_bytes(from, cols), out_rb = dtype_row_bytes(to, cols);
    // Chunks of about 4 M values, in whole rows: a few tens of MiB of floats at most.
    const int64_t chunk = std::max<int64_t>(1, (int64_t{4} << 20) / cols);
    bool first = true;
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t n = std::min(chunk, rows - r0);
      vals.resize(static_cast<size_t>(n * cols));
      buf.resize(out_rb * static_cast<size_t>(n));
      pool.parallel_for(n, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t k = lo; k < hi; ++k) {
          float* v = vals.data() + k * cols;
          kernels::dequantize_row(from, t.data + static_cast<size_t>(r0 + k) * in_rb, v, cols);
          kernels::quantize_row(to, v, buf.data() + static_cast<size_t>(k) * out_rb, cols);
        }
      });
      if (first) w.write_tensor_data(t.name, buf.data(), buf.size()), first = false;
      else w.append_tensor_data(buf.data(), buf.size());
      done += buf.size();
      if (opt.progress) opt.progress(done, sum.out_bytes);
    }
  }
  w.finish();
  return sum;
}

}  // namespace clover::quantize
