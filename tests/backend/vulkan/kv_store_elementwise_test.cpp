// kv_store.comp and elementwise.comp against their CPU twins on random inputs: the cache rows
// byte for byte as the CPU backend writes them (backend/cpu/attention.cpp: F32 copied, F16 and
// Q8_0 through the host quantisers), with the neighbouring positions' bytes untouched even where
// a row does not end on a word; the residual add, the attention gate and the copy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/vulkan/ops.h"
#include "backend/vulkan/vk_test_util.h"
#include "kernels/convert.h"

namespace clover::vulkan::test {
namespace {

class KvStoreTest : public VulkanTest {};

// values per position, positions in the cache, first new positions, new tokens: one recorded list
// submitted once per entry of n_pasts (the word it reads rewritten in between, as the executor's
// pass parameters are), each store of the same rows checked against the CPU's bytes.
void check_store(Device& dev, DType type, int64_t values, int64_t n_ctx, std::initializer_list<int64_t> n_pasts,
                 int64_t tokens, uint32_t seed) {
  const uint64_t row_bytes = dtype_row_bytes(type, values);
  const int64_t x_stride = values + 3;  // rows of x further apart than a row
  const std::vector<float> x = random_floats(static_cast<size_t>(tokens * x_stride), seed, -3.f, 3.f);
  // The cache starts as random bytes: what the store must not touch must stay as it was.
  std::vector<uint8_t> cache((n_ctx * row_bytes + 3) / 4 * 4);
  std::mt19937 rng(seed + 1);
  for (auto& b : cache) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> want = cache;
  Buffer xb = to_device(dev, x);
  Buffer cb = to_device(dev, cache.data(), cache.size(), MemoryPurpose::Cache);
  Buffer np = dev.create_buffer(8, MemoryPurpose::Scratch, Residency::Host);
  CommandList cl(dev);
  cl.begin();
  record_kv_store(cl, dev, whole(xb), tokens, values, x_stride, type, cb, row_bytes, {whole(np), 1});
  cl.end();
  for (int64_t n_past : n_pasts) {
    for (int64_t t = 0; t < tokens; ++t) {
      uint8_t* dst = want.data() + (n_past + t) * row_bytes;
      if (type == DType::Q8_0)
        kernels::quantize_row_q8_0_activation(x.data() + t * x_stride, reinterpret_cast<BlockQ8_0*>(dst), values);
      else
        kernels::quantize_row(type, x.data() + t * x_stride, dst, values);
    }
    static_cast<uint32_t*>(np.mapped())[0] = 0xffffffffu;  // not the word the shader reads
    static_cast<uint32_t*>(np.mapped())[1] = static_cast<uint32_t>(n_past);
    cl.run();
    const std::vector<uint8_t> got = from_device<uint8_t>(dev, cb, cache.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(int(got[i]), int(want[i])) << dtype_name(type) << " n_past " << n_past << " byte " << i << " (position "
                                           << i / row_bytes << ")";
  }
}

TEST_F(KvStoreTest, F32RowsAreCopied) { check_store(dev(), DType::F32, 96, 9, {3}, 4, 1); }
TEST_F(KvStoreTest, F16RowsRoundAsTheCpu) {
  check_store(dev(), DType::F16, 64, 7, {0}, 7, 2);
  check_store(dev(), DType::F16, 6, 11, {5}, 3, 3);  // 12-byte rows: every word is one position's
}
// One KV head of 32 values: 34-byte rows, so words straddle two positions.
TEST_F(KvStoreTest, Q8_0RowsQuantiseAsTheCpuAndLeaveNeighboursAlone) {
  check_store(dev(), DType::Q8_0, 32, 9, {3}, 1, 4);
  check_store(dev(), DType::Q8_0, 32, 9, {1}, 5, 5);
  check_store(dev(), DType::Q8_0, 96, 6, {2}, 3, 6);
}
// A list recorded once stores at whatever n_past its word holds when it runs (every alignment of
// a 34-byte row against the words, and the last positions of the cache).
TEST_F(KvStoreTest, ARecordedStoreFollowsTheNPastItReadsWhenItRuns) {
  check_store(dev(), DType::Q8_0, 32, 12, {0, 1, 2, 3, 6, 10}, 2, 7);
  check_store(dev(), DType::F16, 6, 11, {4, 0, 8}, 3, 8);
}
TEST_F(KvStoreTest, BadShapesAreRefused) {
  Buffer xb = dev().create_buffer(1024, MemoryPurpose::Scratch);
  Buffer cb = dev().create_buffer(340, MemoryPurpose::Cache);
  const DeviceWord np{whole(xb), 0};
  CommandList cl(dev());
  cl.begin();
  EXPECT_THROW(record_kv_store(cl, dev(), whole(xb), 11, 32, 32, DType::Q8_0, cb, 34, np), VulkanError);  // past the end
  EXPECT_THROW(record_kv_store(cl, dev(), whole(xb), 1, 32, 32, DType::Q8_0, cb, 36, np), VulkanError);  // wrong row size
  EXPECT_THROW(record_kv_store(cl, dev(), whole(xb), 1, 32, 32, DType::Q4_0, cb, 18, np), VulkanError);  // no such cache
  EXPECT_THROW(record_kv_store(cl, dev(), whole(xb), 1, 32, 32, DType::Q8_0, cb, 34, {whole(xb), 256}), VulkanError);  // no word
  cl.end();
}

class ElementwiseTest : public VulkanTest {};

TEST_F(ElementwiseTest, AddGateAndCopyMatchTheHostLoops) {
  const int64_t rows = 5, hd = 24, heads = 3, n = hd * heads, y_row = n + 4, x_row = 2 * n + 8;
  const std::vector<float> x = random_floats(static_cast<size_t>(rows * x_row), 7, -6.f, 6.f);
  const std::vector<float> y0 = random_floats(static_cast<size_t>(rows * y_row), 8);
  struct Op {
    Elementwise op;
    ElementwiseShape shape;
  };
  ElementwiseShape plain{n, rows, y_row, x_row};
  ElementwiseShape gate{n, rows, y_row, x_row, hd, 2 * hd, hd};  // the gate halves of [query | gate] heads
  for (const Op& o : {Op{Elementwise::Add, plain}, Op{Elementwise::MulSigmoid, gate}, Op{Elementwise::Copy, plain}}) {
    std::vector<float> want = y0;
    const int64_t seg = o.shape.seg ? o.shape.seg : n;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < n; ++c) {
        const float v = x[r * x_row + (c / seg) * o.shape.x_seg + o.shape.x_off + c % seg];
        float& yv = want[r * y_row + c];
        yv = o.op == Elementwise::Add ? yv + v : o.op == Elementwise::Copy ? v : yv * (1.0f / (1.0f + std::exp(-v)));
      }
    Buffer xb = to_device(dev(), x), yb = to_device(dev(), y0);
    CommandList cl(dev());
    cl.begin();
    record_elementwise(cl, dev(), o.op, o.shape, whole(xb), whole(yb));
    cl.end();
    cl.run();
    const std::vector<float> got = from_device<float>(dev(), yb, want.size());
    EXPECT_LE(nmse(got.data(), want.data(), want.size()), 1e-12) << "op " << static_cast<int>(o.op);
    for (int64_t r = 0; r < rows; ++r)  // the padding after each row is untouched
      for (int64_t c = n; c < y_row; ++c) ASSERT_EQ(got[r * y_row + c], y0[r * y_row + c]);
  }
}

// The attention gate and the quantisation of its output for the output projection in one
// dispatch (quantize_q8_0_activation.comp GATE; quantize_q8_k_activation.comp GATE for Q8_K,
// rows of two super-blocks) against the two: gated rows and quantised blocks bitwise equal.
TEST_F(ElementwiseTest, GateAndQuantisationInOneDispatchAreBitwiseTheTwo) {
  const int64_t rows = 5, hd = 64, heads = 8, n = hd * heads, y_row = n + 12, x_row = 2 * n + 8;
  const std::vector<float> x = random_floats(static_cast<size_t>(rows * x_row), 17, -6.f, 6.f);
  const std::vector<float> y0 = random_floats(static_cast<size_t>(rows * y_row), 18);
  const ElementwiseShape gate{n, rows, y_row, x_row, hd, 2 * hd, hd};
  for (const Q8Kind kind : {Q8Kind::Q8_0, Q8Kind::Q8_1, Q8Kind::Q8_K}) {
    std::vector<float> ys[2];
    Q8Contents q8[2];
    uint32_t dispatches[2] = {};
    for (int fused = 0; fused < 2; ++fused) {
      Buffer xb = to_device(dev(), x), yb = to_device(dev(), y0);
      Q8Activations a = make_q8_activations(dev(), rows, n, kind);
      CommandList cl(dev());
      cl.begin();
      if (fused) {
        record_sigmoid_gate_quantize(cl, dev(), gate, whole(xb), whole(yb), a);
      } else {
        record_elementwise(cl, dev(), Elementwise::MulSigmoid, gate, whole(xb), whole(yb));
        record_quantize(cl, dev(), whole(yb), rows, n, y_row, a);
      }
      cl.end();
      cl.run();
      dispatches[fused] = cl.dispatches();
      ys[fused] = from_device<float>(dev(), yb, y0.size());
      q8[fused] = q8_contents(dev(), a);
    }
    EXPECT_EQ(ys[1], ys[0]) << q8_kind_name(kind);
    EXPECT_EQ(q8[1].quants, q8[0].quants) << q8_kind_name(kind);
    EXPECT_EQ(q8[1].scales, q8[0].scales) << q8_kind_name(kind);
    EXPECT_EQ(dispatches[1], 1u) << q8_kind_name(kind);
    EXPECT_NE(ys[1], y0);
  }
}

}  // namespace
}  // namespace clover::vulkan::test
