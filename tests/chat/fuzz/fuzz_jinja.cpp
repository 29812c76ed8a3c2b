// libFuzzer entry point; the body is in fuzz_bodies.h (also replayed by test_chat_fuzz_regressions).
#include "fuzz_bodies.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return clover::chat::fuzz::jinja_one(data, size);
}
