// matmul.comp and quantize_q8_0_activation.comp against their CPU twins (kernels::matmul_ref,
// kernels::quantize_row_q8_0_activation) on random weights and odd shapes; the block types
// beyond Q8_0 / Q4_0 also against their dequantised weights in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/vulkan/ops.h"
#include "backend/vulkan/vk_test_util.h"
#include "kernels/convert.h"
#include "kernels/kquant.h"
#include "kernels/legacy_quant.h"
#include "kernels/matmul.h"
#include "kernels/repack.h"

namespace clover::vulkan::test {
namespace {

using MatmulTest = VulkanTest;

struct Case {
  int64_t rows, cols, n_act;
};

// Runs the product on the device (the matrix `lead` bytes into its buffer, so the in-binding
// offset path runs) and returns y [n_act][rows]; the CPU twin's result goes to ref. For block
// weights, exact (when given) gets the product the device means to compute, in double: the
// weights as kernels::dequantize_row gives them times the Q8_0 / Q8_K activations the device made
// (read back, so a one-ulp difference in the activation quantiser is not counted here).
std::vector<float> run_matmul(Device& dev, const HostMatrix& m, const std::vector<float>& x, int64_t n_act,
                              std::vector<float>& ref, uint64_t lead = 0, std::vector<float>* exact = nullptr) {
  const kernels::MatRef& w = m.ref;
  kernels::ActRows acts;
  acts.convert(x.data(), n_act, w.cols, w.cols, kernels::activation_type(w.type));
  ref.assign(static_cast<size_t>(n_act * w.rows), 0.0f);
  kernels::matmul_ref(w, acts, ref.data(), w.rows, 0, w.rows);

  Buffer wb = dev.create_buffer(lead + device_matrix_bytes(w) + 4, MemoryPurpose::Weights);
  const DeviceMatrix dm = upload_matrix(dev, w, wb, lead);
  Buffer xb = to_device(dev, x);
  Buffer yb = dev.create_buffer(ref.size() * 4, MemoryPurpose::Scratch);
  const bool quant = reads_q8_activations(dm.type);
  Q8Activations q8;
  if (quant) q8 = make_q8_activations(dev, n_act, w.cols, activation_kind(w.type));
  CommandList cl(dev);
  cl.begin();
  if (quant) record_quantize(cl, dev, whole(xb), n_act, w.cols, w.cols, q8);
  record_matmul(cl, dev, dm, whole(xb), w.cols, quant ? &q8 : nullptr, n_act, whole(yb), w.rows);
  cl.end();
  cl.run();
  if (exact && quant) {
    const int64_t nb = w.cols / 32;
    const std::vector<uint32_t> qw = from_device<uint32_t>(dev, q8.quants, static_cast<size_t>(n_act * nb * 8));
    const int per = q8.kind == Q8Kind::Q8_1 ? 2 : 1;  // Q8_1: (d, s) per block
    const std::vector<float> qd = from_device<float>(dev, q8.scales, static_cast<size_t>(n_act * nb * per));
    std::vector<float> wrow(static_cast<size_t>(w.cols));
    exact->assign(ref.size(), 0.0f);
    for (int64_t o = 0; o < w.rows; ++o) {
      kernels::dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + o * w.row_stride, wrow.data(), w.cols);
      for (int64_t r = 0; r < n_act; ++r) {
        double sum = 0;
        for (int64_t c = 0; c < w.cols; ++c) {
          const int64_t b = r * nb + c / 32, j = c % 32;
          const int q = static_cast<int8_t>((qw[b * 8 + j / 4] >> (8 * (j % 4))) & 0xff);
          sum += static_cast<double>(wrow[c]) * (static_cast<double>(q) * qd[b * per]);
        }
        (*exact)[r * w.rows + o] = static_cast<float>(sum);
      }
    }
  }
  return from_device<float>(dev, yb, ref.size());
}

// The block types beyond Q8_0 / Q4_0: the device product against (a) the exact product of the
// dequantised weights and the device's activation quants, NMSE <= 1e-9: only float rounding
// separates them (each sub-block's integer sum is exact; d_w * d_x * sum and the partial sums
// round at ~6e-8 relative, an NMSE near 1e-14), while one misread quant in a row of 256 already
// gives ~1e-5; (b) the CPU's matmul_ref, NMSE <= 5e-4 as for Q4_0: the same activation
// roundings (Q8_K for the K-quants and IQ4_XS, Q8_1 for Q4_1 / Q5_1, Q8_0 otherwise) up to a
// rare one-ulp flip of the device's quantiser. (a) uses the exact offset term d_x x sum(q), not
// Q8_1's fp16 of it, so for Q4_1 / Q5_1 it is held to 1e-5, the size of that rounding here.
void check_block_type(Device& dev, DType t, std::initializer_list<Case> cases) {
  uint32_t seed = 11;
  double worst_exact = 0, worst_cpu = 0;
  for (const Case& c : cases) {
    const HostMatrix m = random_matrix(t, c.rows, c.cols, seed++);
    const std::vector<float> x = random_floats(static_cast<size_t>(c.n_act * c.cols), seed++);
    std::vector<float> ref, exact;
    const std::vector<float> y = run_matmul(dev, m, x, c.n_act, ref, 4 * (seed % 5), &exact);
    ASSERT_EQ(exact.size(), y.size());
    const double e = nmse(y.data(), exact.data(), y.size()), ec = nmse(y.data(), ref.data(), y.size());
    worst_exact = std::max(worst_exact, e);
    worst_cpu = std::max(worst_cpu, ec);
    EXPECT_LE(e, activation_kind(t) == Q8Kind::Q8_1 ? 1e-5 : 1e-9) << dtype_name(t) << " " << c.rows << "x" << c.cols << " with " << c.n_act << " rows (exact)";
    EXPECT_LE(ec, 5e-4) << dtype_name(t) << " " << c.rows << "x" << c.cols << " with " << c.n_act << " rows (CPU)";
  }
  std::printf("matmul %s: worst NMSE %.3g against the exact product (tolerance 1e-9), %.3g against the CPU (5e-4)\n",
              std::string(dtype_name(t)).c_str(), worst_exact, worst_cpu);
}

void check_type(Device& dev, DType t, double tolerance, std::initializer_list<Case> cases) {
  uint32_t seed = 1;
  double worst = 0;
  for (const Case& c : cases) {
    const HostMatrix m = random_matrix(t, c.rows, c.cols, seed++);
    const std::vector<float> x = random_floats(static_cast<size_t>(c.n_act * c.cols), seed++);
    std::vector<float> ref;
    const std::vector<float> y = run_matmul(dev, m, x, c.n_act, ref, 4 * (seed % 5));
    const double e = nmse(y.data(), ref.data(), y.size());
    worst = std::max(worst, e);
    EXPECT_LE(e, tolerance) << dtype_name(t) << " " << c.rows << "x" << c.cols << " with " << c.n_act << " rows";
  }
  std::printf("matmul %s: worst NMSE %.3g (tolerance %.1g)\n", std::string(dtype_name(t)).c_str(), worst, tolerance);
}

// Odd row counts, columns that are not a multiple of the 64 invocations, activation-row counts
// on both sides of the tile of 8.
TEST_F(MatmulTest, F32MatchesTheReference) {
  check_type(dev(), DType::F32, 1e-7, {{37, 97, 1}, {70, 160, 3}, {19, 64, 9}, {5, 1031, 17}});
}
TEST_F(MatmulTest, F16MatchesTheReference) {
  check_type(dev(), DType::F16, 1e-7, {{37, 97, 1}, {70, 160, 3}, {19, 64, 9}, {5, 1031, 17}});
}
// BF16 weights stay bf16 on the device (widened by a shift in the shader); activations are
// rounded to bf16 as the CPU rounds them, so the F32 bound holds.
TEST_F(MatmulTest, Bf16MatchesTheReference) {
  check_type(dev(), DType::BF16, 1e-7, {{37, 96, 1}, {70, 160, 3}, {19, 64, 9}, {5, 1030, 17}});
}
TEST_F(MatmulTest, Q8_0MatchesTheReference) {
  check_type(dev(), DType::Q8_0, 5e-4, {{37, 96, 1}, {70, 160, 3}, {19, 64, 9}, {6, 2080, 17}});
}
TEST_F(MatmulTest, Q4_0MatchesTheReference) {
  check_type(dev(), DType::Q4_0, 5e-4, {{37, 96, 1}, {70, 160, 3}, {19, 64, 9}, {6, 2080, 17}});
}

// Super-blocks of 256: odd row counts, 1 to 3 super-blocks per row, both sides of the tile of 8.
TEST_F(MatmulTest, Q2_KMatchesTheReference) {
  check_block_type(dev(), DType::Q2_K, {{37, 256, 1}, {70, 512, 3}, {19, 256, 9}, {6, 768, 17}});
}
TEST_F(MatmulTest, Q3_KMatchesTheReference) {
  check_block_type(dev(), DType::Q3_K, {{37, 256, 1}, {70, 512, 3}, {19, 256, 9}, {6, 768, 17}});
}
TEST_F(MatmulTest, Q4_KMatchesTheReference) {
  check_block_type(dev(), DType::Q4_K, {{37, 256, 1}, {70, 512, 3}, {19, 256, 9}, {6, 768, 17}});
}
TEST_F(MatmulTest, Q5_KMatchesTheReference) {
  check_block_type(dev(), DType::Q5_K, {{37, 256, 1}, {70, 512, 3}, {19, 256, 9}, {6, 768, 17}});
}
TEST_F(MatmulTest, Q6_KMatchesTheReference) {
  check_block_type(dev(), DType::Q6_K, {{37, 256, 1}, {70, 512, 3}, {19, 256, 9}, {6, 768, 17}});
}
TEST_F(MatmulTest, IQ4_XSMatchesTheReference) {
  check_block_type(dev(), DType::IQ4_XS, {{37, 256, 1}, {70, 512, 3}, {19, 256, 9}, {6, 768, 17}});
}
// Blocks of 32 of 20, 22, 24 and 18 bytes: rows that start off a word (3 blocks of 22 bytes).
TEST_F(MatmulTest, Q4_1MatchesTheReference) {
  check_block_type(dev(), DType::Q4_1, {{37, 96, 1}, {70, 160, 3}, {19, 64, 9}, {6, 2080, 17}});
}
TEST_F(MatmulTest, Q5_0MatchesTheReference) {
  check_block_type(dev(), DType::Q5_0, {{37, 96, 1}, {70, 160, 3}, {19, 64, 9}, {6, 2080, 17}});
}
TEST_F(MatmulTest, Q5_1MatchesTheReference) {
  check_block_type(dev(), DType::Q5_1, {{37, 96, 1}, {70, 160, 3}, {19, 64, 9}, {6, 2080, 17}});
}
TEST_F(MatmulTest, IQ4_NLMatchesTheReference) {
  check_block_type(dev(), DType::IQ4_NL, {{37, 96, 1}, {70, 160, 3}, {19, 64, 9}, {6, 2080, 17}});
}

// A weight matrix larger than one binding is split into row chunks that each fit: the limit is
// lowered so that a small matrix needs several chunks at unaligned row offsets (every other
// binding of the product stays under the lowered limit too: 2 x 101 outputs).
// Batch invariance of the dense product: each of 45 activation rows (a group of 32 in tiles of 8,
// then 13) is bitwise the row multiplied alone, on the path that decodes a block once for the
// group's rows (up to 64 blocks) and on the one that reads the weights per tile.
TEST_F(MatmulTest, RowsOfAPassAreEachTheRowAlone) {
  const std::initializer_list<std::pair<DType, int64_t>> cases = {
      {DType::Q4_0, 512}, {DType::Q4_0, 4096}, {DType::Q4_K, 512}, {DType::Q6_K, 2304}, {DType::F16, 300}};
  for (const auto& [t, cols] : cases) {
    const int64_t rows = 37, n = 45;
    const HostMatrix m = random_matrix(t, rows, cols, 77);
    const std::vector<float> x = random_floats(static_cast<size_t>(n * cols), 78);
    std::vector<float> ref;
    const std::vector<float> all = run_matmul(dev(), m, x, n, ref);
    EXPECT_LE(nmse(all.data(), ref.data(), all.size()), reads_q8_activations(t) ? 5e-4 : 1e-7) << dtype_name(t);
    for (int64_t r = 0; r < n; r += 4) {  // every fourth row: lavapipe time
      std::vector<float> one_ref;
      const std::vector<float> one =
          run_matmul(dev(), m, std::vector<float>(x.begin() + r * cols, x.begin() + (r + 1) * cols), 1, one_ref);
      for (int64_t o = 0; o < rows; ++o)
        ASSERT_EQ(all[static_cast<size_t>(r * rows + o)], one[static_cast<size_t>(o)])
            << dtype_name(t) << " " << cols << " columns: row " << r << " output " << o;
    }
  }
}

TEST_F(MatmulTest, MatrixLargerThanOneBindingIsSplit) {
  for (DType t : {DType::Q4_0, DType::F16, DType::Q5_0, DType::Q6_K}) {
    const int64_t cols = dtype_block_size(t) == 256 ? 256 : 96;  // Q5_0: 66-byte rows, Q6_K: 210
    const HostMatrix m = random_matrix(t, 101, cols, 77);
    const std::vector<float> x = random_floats(2 * cols, 78);
    std::vector<float> ref;
    const std::vector<float> whole_y = run_matmul(dev(), m, x, 2, ref, 12);
    // 18-byte Q4_0 blocks: a chunk boundary inside a 16-byte line; Q6_K's 2 KiB (its 2 x 256
    // float activations must fit too) holds 9 rows of 210 bytes, so chunks start off a word.
    dev().set_binding_limit(t == DType::Q6_K ? 2048 : 1024);
    const std::vector<float> split_y = run_matmul(dev(), m, x, 2, ref, 12);
    dev().set_binding_limit(dev().info().max_storage_buffer_range);
    EXPECT_EQ(split_y, whole_y) << dtype_name(t) << ": a split changes the result";
    EXPECT_LE(nmse(split_y.data(), ref.data(), ref.size()), 5e-4);
  }
}

TEST_F(MatmulTest, QuantizedActivationsMatchTheCpuQuantiser) {
  const int64_t rows = 5, cols = 4 * 32 * 7;
  std::vector<float> x = random_floats(static_cast<size_t>(rows * cols), 9, -3.0f, 3.0f);
  for (int j = 0; j < 32; ++j) x[32 + j] = 0.0f;  // an all-zero block: d = 0, q = 0
  Buffer xb = to_device(dev(), x);
  Q8Activations q8 = make_q8_activations(dev(), rows, cols);
  CommandList cl(dev());
  cl.begin();
  record_quantize_q8_0(cl, dev(), whole(xb), rows, cols, cols, q8);
  cl.end();
  cl.run();
  const int64_t nb = rows * cols / 32;
  const std::vector<uint32_t> qw = from_device<uint32_t>(dev(), q8.quants, static_cast<size_t>(nb * 8));
  const std::vector<float> d = from_device<float>(dev(), q8.scales, static_cast<size_t>(nb));
  std::vector<BlockQ8_0> cpu(static_cast<size_t>(nb));
  kernels::quantize_row_q8_0_activation(x.data(), cpu.data(), rows * cols);
  int64_t q_diff = 0;
  for (int64_t b = 0; b < nb; ++b) {
    EXPECT_EQ(d[b], kernels::fp16_to_fp32(cpu[b].d)) << "block " << b;
    for (int j = 0; j < 32; ++j) {
      const int gpu_q = static_cast<int8_t>((qw[b * 8 + j / 4] >> (8 * (j % 4))) & 0xff);
      const int diff = std::abs(gpu_q - cpu[b].qs[j]);
      EXPECT_LE(diff, 1) << "block " << b << " value " << j;
      q_diff += diff != 0;
    }
  }
  // The device's division 127 / amax may be an ulp off the CPU's; a quant then rounds the other
  // way only when x * id sits within an ulp of a half. Allow that, rarely.
  EXPECT_LE(q_diff, nb * 32 / 1000) << q_diff << " quants differ";
  std::printf("quantize_q8_0: %lld of %lld quants differ by one\n", static_cast<long long>(q_diff),
              static_cast<long long>(nb * 32));
}

// Q8_1 (Q4_1 / Q5_1 products): Q8_0's quants and d, and s = fp16(amax / 127 x sum(q)), equal to
// the CPU's wherever the block's quants are (a one-ulp flip of a quant moves the sum).
TEST_F(MatmulTest, QuantizedQ8_1ActivationsMatchTheCpuQuantiser) {
  const int64_t rows = 4, cols = 32 * 9;
  std::vector<float> x = random_floats(static_cast<size_t>(rows * cols), 29, -2.0f, 3.0f);  // sums far from 0
  for (int j = 0; j < 32; ++j) x[64 + j] = 0.0f;
  Buffer xb = to_device(dev(), x);
  Q8Activations q8 = make_q8_activations(dev(), rows, cols, Q8Kind::Q8_1);
  CommandList cl(dev());
  cl.begin();
  record_quantize(cl, dev(), whole(xb), rows, cols, cols, q8);
  cl.end();
  cl.run();
  const int64_t nb = rows * cols / 32;
  const std::vector<uint32_t> qw = from_device<uint32_t>(dev(), q8.quants, static_cast<size_t>(nb * 8));
  const std::vector<float> ds = from_device<float>(dev(), q8.scales, static_cast<size_t>(nb * 2));
  std::vector<BlockQ8_1> cpu(static_cast<size_t>(nb));
  kernels::quantize_row_q8_1_activation(x.data(), cpu.data(), rows * cols);
  int64_t same = 0, s_equal = 0;
  for (int64_t b = 0; b < nb; ++b) {
    EXPECT_EQ(ds[2 * b], kernels::fp16_to_fp32(cpu[b].d)) << "block " << b;
    bool equal = true;
    for (int j = 0; j < 32; ++j) equal &= static_cast<int8_t>((qw[b * 8 + j / 4] >> (8 * (j % 4))) & 0xff) == cpu[b].qs[j];
    if (!equal) continue;
    ++same;
    // Equal on lavapipe; a GPU's division (Vulkan allows 2.5 ulp) may move amax / 127 x sum
    // across an fp16 rounding boundary: one fp16 step (2^-10 relative) allowed.
    const float s_cpu = kernels::fp16_to_fp32(cpu[b].s);
    EXPECT_NEAR(ds[2 * b + 1], s_cpu, std::fabs(s_cpu) * 0x1p-10f) << "block " << b;
    s_equal += ds[2 * b + 1] == s_cpu;
  }
  EXPECT_GE(same, nb - 2);
  std::printf("quantize_q8_1: %lld of %lld blocks with the CPU's quants, %lld of them with its s exactly\n",
              static_cast<long long>(same), static_cast<long long>(nb), static_cast<long long>(s_equal));
}

TEST_F(MatmulTest, QuantizedQ8_KActivationsMatchTheCpuQuantiser) {
  const int64_t rows = 3, cols = 256 * 5;
  std::vector<float> x = random_floats(static_cast<size_t>(rows * cols), 19, -3.0f, 3.0f);
  for (int j = 0; j < 256; ++j) x[256 + j] = 0.0f;          // an all-zero super-block: d = 0, q = 0
  x[3 * 256 + 7] = 5.0f, x[3 * 256 + 9] = -5.0f;           // a tie of magnitudes: the first wins (-127)
  x[4 * 256 + 1] = -4.0f;                                   // a negative maximum
  x[2 * 256 + 2] = -6.0f, x[2 * 256 + 250] = 6.0f;        // a tie across the device's halves: the first wins
  Buffer xb = to_device(dev(), x);
  Q8Activations q8 = make_q8_activations(dev(), rows, cols, Q8Kind::Q8_K);
  CommandList cl(dev());
  cl.begin();
  record_quantize_q8_k(cl, dev(), whole(xb), rows, cols, cols, q8);
  cl.end();
  cl.run();
  const int64_t nb = rows * cols / 256;
  const std::vector<uint32_t> qw = from_device<uint32_t>(dev(), q8.quants, static_cast<size_t>(rows * cols / 4));
  const std::vector<float> d = from_device<float>(dev(), q8.scales, static_cast<size_t>(rows * cols / 32));
  std::vector<BlockQ8_K> cpu(static_cast<size_t>(nb));
  kernels::quantize_row_q8_k_activation(x.data(), cpu.data(), rows * cols);
  int64_t q_diff = 0;
  for (int64_t b = 0; b < nb; ++b) {
    // The device's -127 / max and 1 / iscale may each be off the CPU's (Vulkan allows 2.5 ulp for
    // a division; lavapipe is exact): 1e-6 relative covers both.
    for (int s = 0; s < 8; ++s) EXPECT_NEAR(d[b * 8 + s], cpu[b].d, std::fabs(cpu[b].d) * 1e-6) << "block " << b;
    for (int j = 0; j < 256; ++j) {
      const int gpu_q = static_cast<int8_t>((qw[b * 64 + j / 4] >> (8 * (j % 4))) & 0xff);
      const int diff = std::abs(gpu_q - cpu[b].qs[j]);
      EXPECT_LE(diff, 1) << "block " << b << " value " << j;
      q_diff += diff != 0;
    }
  }
  EXPECT_EQ(cpu[1].d, 0.0f);
  EXPECT_EQ(static_cast<int8_t>(qw[3 * 64 + 1] >> 24), -127);  // value 7 of super-block 3
  EXPECT_EQ(static_cast<int8_t>(qw[2 * 64 + 0] >> 16), -127);  // value 2 of super-block 2
  EXPECT_EQ(static_cast<int8_t>(qw[2 * 64 + 62] >> 16), 127);  // value 250
  EXPECT_LE(q_diff, nb * 256 / 1000) << q_diff << " quants differ";
  std::printf("quantize_q8_k: %lld of %lld quants differ by one\n", static_cast<long long>(q_diff),
              static_cast<long long>(nb * 256));
}

// A Q4_0 or Q4_K matrix the CPU repacked in place (kernels/repack.h) reaches the device in the
// file's row-major blocks, byte for byte what the unrepacked matrix uploads.
TEST_F(MatmulTest, UploadOfACpuRepackedMatrixIsTheFilesLayout) {
  for (DType t : {DType::Q4_0, DType::Q4_K}) {
    const HostMatrix m = random_matrix(t, 48, 512, 5);
    std::vector<uint8_t> packed(static_cast<size_t>(m.ref.rows) * m.ref.row_stride);
    const kernels::MatRef p = kernels::repack(m.ref, packed.data());
    ASSERT_NE(p.layout, kernels::Layout::RowMajor);
    const uint64_t bytes = device_matrix_bytes(m.ref);
    ASSERT_EQ(bytes, device_matrix_bytes(p));
    Buffer a = dev().create_buffer(bytes + 4, MemoryPurpose::Weights), b = dev().create_buffer(bytes + 4, MemoryPurpose::Weights);
    upload_matrix(dev(), m.ref, a, 0);
    upload_matrix(dev(), p, b, 0);
    const std::vector<uint32_t> wa = from_device<uint32_t>(dev(), a, static_cast<size_t>(bytes / 4));
    const std::vector<uint32_t> wb = from_device<uint32_t>(dev(), b, static_cast<size_t>(bytes / 4));
    EXPECT_EQ(wa, wb) << dtype_name(t);
  }
}

TEST_F(MatmulTest, BadShapesAreRefused) {
  const HostMatrix m = random_matrix(DType::Q8_0, 4, 64, 3);
  Buffer wb = dev().create_buffer(device_matrix_bytes(m.ref), MemoryPurpose::Weights);
  const DeviceMatrix dm = upload_matrix(dev(), m.ref, wb, 0);
  Buffer xb = dev().create_buffer(64 * 4, MemoryPurpose::Scratch);
  CommandList cl(dev());
  cl.begin();
  EXPECT_THROW(record_matmul(cl, dev(), dm, whole(xb), 64, nullptr, 1, whole(xb), 4), VulkanError);  // no Q8 acts
  Q8Activations narrow = make_q8_activations(dev(), 1, 32);
  EXPECT_THROW(record_matmul(cl, dev(), dm, whole(xb), 64, &narrow, 1, whole(xb), 4), VulkanError);
  EXPECT_THROW(make_q8_activations(dev(), 1, 33), VulkanError);
  EXPECT_THROW(make_q8_activations(dev(), 1, 96, Q8Kind::Q8_K), VulkanError);  // Q8_K: whole super-blocks
  // Q4_K weights refuse Q8_0 activations (and Q8_0 weights Q8_K ones).
  const HostMatrix mk = random_matrix(DType::Q4_K, 2, 256, 4);
  Buffer wk = dev().create_buffer(device_matrix_bytes(mk.ref), MemoryPurpose::Weights);
  const DeviceMatrix dk = upload_matrix(dev(), mk.ref, wk, 0);
  Q8Activations q8_0 = make_q8_activations(dev(), 1, 256), q8_k = make_q8_activations(dev(), 1, 256, Q8Kind::Q8_K);
  Buffer yb = dev().create_buffer(16, MemoryPurpose::Scratch);
  EXPECT_THROW(record_matmul(cl, dev(), dk, whole(xb), 256, &q8_0, 1, whole(yb), 2), VulkanError);
  EXPECT_THROW(record_quantize_q8_0(cl, dev(), whole(xb), 1, 256, 256, q8_k), VulkanError);
  cl.end();
}

}  // namespace
}  // namespace clover::vulkan::test
