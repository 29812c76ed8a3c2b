// libFuzzer entry for the request parser (tests/server/fuzz_request.h).
#include "fuzz_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return clover::server::fuzz::request_one(data, size); }
