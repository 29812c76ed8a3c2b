// The request parser's fuzz body: any bytes as a request body of both completion endpoints.
// Every input must end in a parsed request or an ApiError 400, in time linear in its size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/api_error.h"
#include "server/request.h"

namespace clover::server::fuzz {

inline int request_one(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  RequestDefaults d;
  try {
    const json j = parse_body(body);
    try {
      parse_chat_request(j, d);
    } catch (const ApiError& e) {
      if (e.status != 400) __builtin_trap();
    }
    parse_completion_request(j, d, 1000);
  } catch (const ApiError& e) {
    if (e.status != 400) __builtin_trap();  // a client's bytes are a 400, never anything else
  }
  return 0;
}

}  // namespace clover::server::fuzz
