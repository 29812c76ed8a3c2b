// The device layer: enumeration, the memory account, copies, command lists resubmitted, the
// timeline, pipelines of every embedded shader, and the errors bad arguments give.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "backend/vulkan/loader.h"
#include "backend/vulkan/pipeline.h"
#include "backend/vulkan/ops.h"
#include "backend/vulkan/profile.h"
#include "backend/vulkan/vk_test_util.h"

namespace clover::vulkan::test {
namespace {

using DeviceTest = VulkanTest;

// Runs everywhere (no device needed): a machine without libvulkan gets a message, not a crash,
// and the CPU path is unaffected.
TEST(VulkanLoader, MissingLoaderIsAClearError) {
  setenv("CLOVER_VULKAN_LIBRARY", "/nonexistent/libvulkan.so.1", 1);
  std::string error;
  std::unique_ptr<Instance> inst = Instance::create({}, error);
  unsetenv("CLOVER_VULKAN_LIBRARY");
  EXPECT_EQ(inst, nullptr);
  EXPECT_NE(error.find("no Vulkan driver"), std::string::npos) << error;
  EXPECT_NE(error.find("/nonexistent/libvulkan.so.1"), std::string::npos) << error;
}

// A loader without any driver: either no instance ("no Vulkan driver") or one without devices.
TEST(VulkanLoader, NoDriverIsAClearErrorOrNoDevices) {
  setenv("VK_ICD_FILENAMES", "/nonexistent/icd.json", 1);
  setenv("VK_DRIVER_FILES", "/nonexistent/icd.json", 1);
  std::string error;
  std::unique_ptr<Instance> inst = Instance::create({}, error);
  unsetenv("VK_ICD_FILENAMES");
  unsetenv("VK_DRIVER_FILES");
  if (!inst) {
    EXPECT_NE(error.find("no Vulkan driver"), std::string::npos) << error;
  } else {
    EXPECT_TRUE(inst->devices().empty());
    EXPECT_EQ(inst->default_device(), -1);
    EXPECT_THROW(inst->resolve("vulkan"), VulkanError);
  }
}

TEST_F(DeviceTest, EnumeratesTheDeviceWithItsLimits) {
  const DeviceInfo& d = dev().info();
  EXPECT_FALSE(d.name.empty());
  EXPECT_TRUE(d.usable()) << d.unusable_reason();
  EXPECT_GT(d.subgroup_size, 0u);
  EXPECT_GE(d.max_shared_memory, 16384u);  // Vulkan's minimum
  EXPECT_GE(d.max_storage_buffer_range, 1u << 27);
  EXPECT_FALSE(d.heaps.empty());
  // A CPU device is never the default; it runs only when named.
  const int def = inst().default_device();
  if (def >= 0) {
    EXPECT_FALSE(inst().devices()[def].is_cpu());
  }
  EXPECT_EQ(inst().resolve("vulkan:0"), 0);
  EXPECT_THROW(inst().resolve("vulkan:99"), VulkanError);
  EXPECT_THROW(inst().resolve("vulkan:x"), VulkanError);
}

// The messenger really counts: a second instance (so this case's own count stays zero) sees an
// invalid call (a buffer of size 0, VUID-VkBufferCreateInfo-size-00912) reported.
// A second instance with validation, so a case's deliberate errors do not count against its own.
std::unique_ptr<Instance> validated_instance() {
  std::string error;
  InstanceOptions opt;
  opt.validate = true;
  std::unique_ptr<Instance> inst = Instance::create(opt, error);
  EXPECT_TRUE(inst) << error;
  return inst;
}

TEST_F(DeviceTest, ValidationMessagesAreCounted) {
  if (!test_validation()) GTEST_SKIP() << "CLOVER_VK_TEST_NO_VALIDATION=1";
  std::unique_ptr<Instance> other = validated_instance();
  ASSERT_TRUE(other);
  Device d(*other, 0);
  ASSERT_EQ(other->validation_messages(), 0u);
  ::testing::internal::CaptureStderr();  // the layer's text for the deliberate error is expected
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = 0;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkBuffer b = VK_NULL_HANDLE;
  const VkResult r = d.fn().vkCreateBuffer(d.handle(), &bci, nullptr, &b);
  const std::string text = ::testing::internal::GetCapturedStderr();
  if (r == VK_SUCCESS && b) d.fn().vkDestroyBuffer(d.handle(), b, nullptr);
  EXPECT_GE(other->validation_messages(), 1u);
  EXPECT_NE(text.find("VUID-VkBufferCreateInfo-size"), std::string::npos) << text;
}

TEST_F(DeviceTest, MemoryAccountBooksEveryAllocationExactly) {
  const uint64_t before = dev().memory().total();
  {
    Buffer a = dev().create_buffer(1000, MemoryPurpose::Weights);
    Buffer b = dev().create_buffer(3, MemoryPurpose::Cache, Residency::Host);
    EXPECT_EQ(a.size(), 1000u);
    EXPECT_EQ(b.size(), 4u);  // rounded up to a word
    EXPECT_GE(a.allocated(), a.size());
    EXPECT_EQ(dev().memory().bytes(MemoryPurpose::Weights), a.allocated());
    EXPECT_EQ(dev().memory().bytes(MemoryPurpose::Cache), b.allocated());
    EXPECT_EQ(dev().memory().total(), before + a.allocated() + b.allocated());
    Buffer moved = std::move(a);  // a move transfers the booking, it does not double it
    EXPECT_EQ(dev().memory().total(), before + moved.allocated() + b.allocated());
  }
  EXPECT_EQ(dev().memory().total(), before);
  EXPECT_EQ(dev().memory().bytes(MemoryPurpose::Weights), 0u);
  EXPECT_THROW(dev().create_buffer(0, MemoryPurpose::Scratch), VulkanError);
}

TEST_F(DeviceTest, UploadDownloadRoundTripsThroughStagingAndMappedMemory) {
  // 9 MiB crosses the 8 MiB staging buffer, so the chunking is exercised.
  std::vector<uint32_t> v(9u << 18);
  std::iota(v.begin(), v.end(), 7u);
  Buffer d = to_device(dev(), v);
  EXPECT_EQ(from_device<uint32_t>(dev(), d, v.size()), v);
  Buffer h = dev().create_buffer(64, MemoryPurpose::Scratch, Residency::Host);
  dev().upload(h, 16, v.data(), 32);
  std::vector<uint32_t> back(8);
  dev().download(h, 16, back.data(), 32);
  EXPECT_EQ(back, std::vector<uint32_t>(v.begin(), v.begin() + 8));
  dev().fill_zero(d);
  EXPECT_EQ(from_device<uint32_t>(dev(), d, 16), std::vector<uint32_t>(16, 0));
  EXPECT_THROW(dev().upload(h, 2, v.data(), 4), VulkanError);   // unaligned
  EXPECT_THROW(dev().upload(h, 0, v.data(), 68), VulkanError);  // past the end
}

// A list recorded once and submitted again sees the new contents of its buffers: the pass-shape
// reuse the executor relies on. The timeline counts every submission.
TEST_F(DeviceTest, RecordedListIsResubmittedWithNewInputs) {
  const int64_t n = 300;
  Buffer x = dev().create_buffer(n * 4, MemoryPurpose::Scratch);
  Buffer best = dev().create_buffer(8, MemoryPurpose::Scratch, Residency::Host);
  CommandList cl(dev());
  cl.begin();
  record_argmax(cl, dev(), whole(x), 1, n, n, whole(best));
  cl.end();
  EXPECT_EQ(cl.dispatches(), 1u);
  uint64_t last = dev().completed();
  for (int hot : {5, 250, 17}) {
    std::vector<float> v(n, 0.0f);
    v[hot] = 3.0f;
    dev().upload(x, 0, v.data(), n * 4);
    const uint64_t value = cl.submit();
    EXPECT_GT(value, last);
    dev().wait(value);
    EXPECT_GE(dev().completed(), value);
    last = value;
    const auto* r = static_cast<const uint32_t*>(best.mapped());
    EXPECT_EQ(r[0], static_cast<uint32_t>(hot));
  }
}

// CLOVER_VK_PROFILE: every dispatch of a profiled list gets a span under its shader and grid, once
// per submission; the submission's time is at least the sum of its ops' spans' largest part.
TEST_F(DeviceTest, ProfiledListsTimeEachDispatchByShaderAndGrid) {
  if (dev().timestamp_valid_bits() == 0) GTEST_SKIP() << "the compute queue writes no timestamps";
  GpuProfile& prof = GpuProfile::get();
  prof.clear();
  const int64_t rows = 256, cols = 512;
  HostMatrix w = random_matrix(DType::F32, rows, cols, 3, 1.0f);
  Buffer wb = dev().create_buffer(device_matrix_bytes(w.ref), MemoryPurpose::Weights);
  const DeviceMatrix dw = upload_matrix(dev(), w.ref, wb, 0);
  const std::vector<float> xs = random_floats(cols, 4, -1.0f, 1.0f);
  Buffer x = to_device(dev(), xs.data(), xs.size() * 4, MemoryPurpose::Scratch);
  Buffer y = dev().create_buffer(rows * 4, MemoryPurpose::Scratch);
  Buffer best = dev().create_buffer(8, MemoryPurpose::Scratch, Residency::Host);
  {
    CommandList off(dev());  // made before the variable is set: not profiled
    ::setenv("CLOVER_VK_PROFILE", "1", 1);
    CommandList cl(dev());
    ::unsetenv("CLOVER_VK_PROFILE");
    for (CommandList* l : {&off, &cl}) {
      l->begin();
      record_matmul(*l, dev(), dw, whole(x), cols, nullptr, 1, whole(y), rows);
      record_argmax(*l, dev(), whole(y), 1, rows, rows, whole(best));
      l->end();
    }
    for (int i = 0; i < 3; ++i) {
      off.run();
      cl.run();
    }
    cl.submit();  // read back when the list goes (its destructor waits)
  }
  const std::string r = prof.report();
  std::printf("%s", r.c_str());
  // Each list: the argmax reads what the matmul wrote, and the closing barrier.
  EXPECT_NE(r.find("4 submissions, 8 ops, 8 barriers needed"), std::string::npos) << r;
  // Workgroups: the matmul's 256 rows (4 a workgroup: 64) and argmax's one, 4 times each.
  EXPECT_NE(r.find("260 workgroups"), std::string::npos) << r;
  // Each op 4 times, under its shader name and grid; the by-shader table has both shaders.
  EXPECT_NE(r.find("       4"), std::string::npos) << r;
  EXPECT_NE(r.find("argmax ["), std::string::npos) << r;
  EXPECT_NE(r.find("matmul_f32 ["), std::string::npos) << r;
  EXPECT_NE(r.find("by shader:"), std::string::npos) << r;
  prof.clear();
  EXPECT_NE(prof.report().find("0 submissions, 0 ops"), std::string::npos);
}

// The drivers the Vulkan loader loads at vkCreateInstance stay loaded when the instance goes
// (loader.h: NVIDIA's driver fails to initialise after ~30 load/unload cycles in one process).
TEST(VulkanLoader, DriversStayLoadedAfterTheInstanceGoes) {
  std::vector<std::string> with;
  {
    std::string error;
    std::unique_ptr<Instance> inst = Instance::create({}, error);
    if (!inst) GTEST_SKIP() << "no Vulkan: " << error;
    with = loaded_libraries();
  }
  const std::vector<std::string> after = loaded_libraries();
  for (const std::string& lib : with)
    EXPECT_TRUE(std::binary_search(after.begin(), after.end(), lib)) << lib << " was unloaded with the instance";
  // And many instances in one process keep working (the test binaries make hundreds).
  for (int i = 0; i < 40; ++i) {
    std::string error;
    ASSERT_TRUE(Instance::create({}, error)) << "instance " << i << ": " << error;
  }
}

// The bindings a shader may write, from its SPIR-V's readonly decorations (pipeline.h): what
// CommandList's hazard tracking trusts.
TEST(VulkanPipeline, ReflectionFindsTheWrittenBindings) {
  auto written = [](const char* name, uint32_t n) {
    const ShaderBlob* b = find_shader(name);
    EXPECT_NE(b, nullptr) << name;
    return b ? spirv_written_bindings(b->words, b->n_words) & ((1u << n) - 1) : 0u;
  };
  EXPECT_EQ(written("matmul_q4_0", 4), 0b1000u);         // weights, acts, scales read; y written
  EXPECT_EQ(written("gdn_step", 6), 0b110000u);          // the state and the output
  // The reverse path never touches its scratch binding (R lives in registers): the compiler drops
  // the variable, and a binding the module does not declare counts as written.
  EXPECT_EQ(written("gdn_step_reverse", 6), 0b110000u);
  EXPECT_EQ(written("elementwise", 2), 0b10u);
  // Every embedded shader writes something, and only bindings it has.
  size_t n = 0;
  const ShaderBlob* all = all_shaders(n);
  for (size_t i = 0; i < n; ++i) EXPECT_NE(spirv_written_bindings(all[i].words, all[i].n_words), 0u) << all[i].name;
  const uint32_t junk[6] = {1, 2, 3, 4, 5, 6};
  EXPECT_THROW(spirv_written_bindings(junk, 6), VulkanError);
  const uint32_t truncated[6] = {0x07230203, 0x10000, 0, 8, 0, (9u << 16) | 71u};  // a 9-word instruction in 1
  EXPECT_THROW(spirv_written_bindings(truncated, 6), VulkanError);
}

namespace {
// Four dependent and independent elementwise ops on a, b (128 floats each) from src:
// a = src; b = src (independent of the first); a += b (reads what both wrote); b = src (writes
// what the third reads). Then two writes to the two halves of c, and c += src over all of it.
void record_hazard_case(CommandList& cl, Device& dev, const Buffer& src, const Buffer& a, const Buffer& b,
                        const Buffer& c) {
  const ElementwiseShape all{128, 1, 128, 128};
  const ElementwiseShape half{64, 1, 64, 64};
  cl.begin();
  record_elementwise(cl, dev, Elementwise::Copy, all, whole(src), whole(a));
  record_elementwise(cl, dev, Elementwise::Copy, all, whole(src), whole(b));
  record_elementwise(cl, dev, Elementwise::Add, all, whole(b), whole(a));
  record_elementwise(cl, dev, Elementwise::Copy, all, whole(src), whole(b));
  record_elementwise(cl, dev, Elementwise::Copy, half, {&src, 0, 256}, {&c, 0, 256});
  record_elementwise(cl, dev, Elementwise::Copy, half, {&src, 256, 256}, {&c, 256, 256});
  record_elementwise(cl, dev, Elementwise::Add, all, whole(src), whole(c));
  cl.end();
}
}  // namespace

// A barrier only where a dispatch depends on one since the last barrier (commands.h): 7
// dispatches, barriers before the third (read after write), the fourth (write after read) and
// the seventh (its range covers both halves written), and the list's closing one. The plain
// twin (CLOVER_VK_BARRIER_EVERY_DISPATCH=1) puts one after each; both give the same values.
TEST_F(DeviceTest, BarriersGoOnlyWhereADispatchDependsOnAnEarlierOne) {
  const std::vector<float> xs = random_floats(128, 9);
  Buffer src = to_device(dev(), xs);
  for (bool every : {false, true}) {
    if (every) ::setenv("CLOVER_VK_BARRIER_EVERY_DISPATCH", "1", 1);
    CommandList cl(dev());
    ::unsetenv("CLOVER_VK_BARRIER_EVERY_DISPATCH");
    Buffer a = dev().create_buffer(512, MemoryPurpose::Scratch), b = dev().create_buffer(512, MemoryPurpose::Scratch);
    Buffer c = dev().create_buffer(512, MemoryPurpose::Scratch);
    record_hazard_case(cl, dev(), src, a, b, c);
    EXPECT_EQ(cl.dispatches(), 7u);
    EXPECT_EQ(cl.barriers(), every ? 8u : 4u);
    EXPECT_EQ(cl.barriers_needed(), 4u);
    cl.run();
    const std::vector<float> av = from_device<float>(dev(), a, 128), bv = from_device<float>(dev(), b, 128);
    const std::vector<float> cv = from_device<float>(dev(), c, 128);
    for (int i = 0; i < 128; ++i) {
      EXPECT_EQ(av[i], xs[i] + xs[i]);
      EXPECT_EQ(bv[i], xs[i]);
      EXPECT_EQ(cv[i], xs[i] + xs[i]);
    }
  }
}

// The synchronization validation the cases run under (instance.h) is live: the same list with
// no barriers at all is reported as a hazard; with the tracked barriers it is silent.
TEST_F(DeviceTest, SyncValidationReportsAMissingBarrier) {
  if (!test_validation()) GTEST_SKIP() << "CLOVER_VK_TEST_NO_VALIDATION=1";
  std::unique_ptr<Instance> other = validated_instance();
  ASSERT_TRUE(other);
  if (!other->sync_validation()) GTEST_SKIP() << "the validation layer offers no VK_EXT_validation_features";
  Device d(*other, 0);
  const std::vector<float> xs = random_floats(128, 10);
  Buffer src = to_device(d, xs);
  Buffer a = d.create_buffer(512, MemoryPurpose::Scratch), b = d.create_buffer(512, MemoryPurpose::Scratch);
  Buffer c = d.create_buffer(512, MemoryPurpose::Scratch);
  {
    CommandList tracked(d);
    record_hazard_case(tracked, d, src, a, b, c);
    tracked.run();
  }
  ASSERT_EQ(other->validation_messages(), 0u);
  ::testing::internal::CaptureStderr();  // the layer's text for the deliberate hazards is expected
  {
    CommandList bare(d);
    bare.skip_barriers_for_test(true);
    record_hazard_case(bare, d, src, a, b, c);
    bare.run();
  }
  const std::string text = ::testing::internal::GetCapturedStderr();
  EXPECT_GE(other->validation_messages(), 1u);
  EXPECT_NE(text.find("SYNC-HAZARD"), std::string::npos) << text;
}

// A submission that outlasts the note interval is waited for to the end (a slow device is not a
// failure: giving up would free buffers the work still writes), with a line saying so.
TEST_F(DeviceTest, WaitOutlastsTheNoteIntervalAndSaysSo) {
  const int64_t rows = 4096, cols = 2048;
  HostMatrix w = random_matrix(DType::F32, rows, cols, 3, 1.0f);
  const std::vector<float> xs = random_floats(cols * 8, 4, -1.0f, 1.0f);
  Buffer wb = dev().create_buffer(device_matrix_bytes(w.ref), MemoryPurpose::Weights);
  const DeviceMatrix dw = upload_matrix(dev(), w.ref, wb, 0);
  Buffer x = to_device(dev(), xs.data(), xs.size() * 4, MemoryPurpose::Scratch);
  Buffer y = dev().create_buffer(rows * 8 * 4, MemoryPurpose::Scratch);
  CommandList cl(dev());
  cl.begin();
  for (int i = 0; i < 4; ++i) record_matmul(cl, dev(), dw, whole(x), cols, nullptr, 8, whole(y), rows);
  cl.end();
  dev().set_wait_note_ns(1000);  // 1 us: far less than the list takes anywhere
  ::testing::internal::CaptureStderr();
  const uint64_t value = cl.submit();
  dev().wait(value);
  const std::string text = ::testing::internal::GetCapturedStderr();
  dev().set_wait_note_ns(60ull * 1000 * 1000 * 1000);
  EXPECT_GE(dev().completed(), value);
  EXPECT_NE(text.find("still waiting"), std::string::npos) << text;
  std::vector<float> got(rows * 8);
  dev().download(y, 0, got.data(), got.size() * 4);
  double dot = 0;
  for (int64_t c = 0; c < cols; ++c) dot += double(reinterpret_cast<const float*>(w.bytes.data())[c]) * xs[c];
  EXPECT_NEAR(got[0], dot, 1e-3 * (1 + std::fabs(dot)));
}

TEST_F(DeviceTest, EveryEmbeddedShaderMakesAPipeline) {
  size_t n = 0;
  const ShaderBlob* all = all_shaders(n);
  EXPECT_GE(n, 9u);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_GT(all[i].n_words, 5u);
    EXPECT_EQ(all[i].words[0], 0x07230203u) << all[i].name << ": not SPIR-V";  // the SPIR-V magic
  }
  // Creating the pipelines under validation checks each module against its layout.
  EXPECT_NO_THROW(dev().pipelines().get("argmax", 2, 8));
  EXPECT_THROW(dev().pipelines().get("argmax", 3, 8), VulkanError);  // differs from the first request
  EXPECT_THROW(dev().pipelines().get("no_such_shader", 1, 0), VulkanError);
}

TEST_F(DeviceTest, BadDispatchesAreRefusedWithTheirReason) {
  Buffer x = dev().create_buffer(64, MemoryPurpose::Scratch);
  CommandList cl(dev());
  const Pipeline& p = dev().pipelines().get("argmax", 2, 8);
  const uint32_t push[2] = {16, 16};
  EXPECT_THROW(cl.dispatch(p, {whole(x), whole(x)}, push, 8, 1), VulkanError);  // not recording
  cl.begin();
  EXPECT_THROW(cl.dispatch(p, {whole(x)}, push, 8, 1), VulkanError);            // one buffer short
  EXPECT_THROW(cl.dispatch(p, {whole(x), BufferRange{&x, 60, 8}}, push, 8, 1), VulkanError);  // past the end
  EXPECT_THROW(cl.dispatch(p, {whole(x), whole(x)}, static_cast<const void*>(push), 4, 1, 1, 1), VulkanError);  // push size
  cl.end();
  EXPECT_THROW(CommandList(dev()).submit(), VulkanError);                        // nothing recorded
}

}  // namespace
}  // namespace clover::vulkan::test
