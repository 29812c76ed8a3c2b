// cpp-httplib's Server with its per-connection loop replaced, so that a slow or hostile client
// cannot hold a thread for long or starve /health (cpp-httplib 0.11, Debian's, bounds each recv()
// by the read timeout but not a whole request: one header line every few seconds keeps a thread
// forever).
//
// What the loop adds:
//   - deadlines: the request line and headers must arrive within `header_timeout_s` of the
//     request's first byte, the body within `body_timeout_s` of the end of the headers; a request
//     that misses one is answered 408 and the connection closed;
//   - at most `max_header_bytes` of request line and headers (431), and no NUL or other control
//     byte in them (400): cpp-httplib would cut a header value at a NUL, so `Bearer K\0junk`
//     would read as `Bearer K`;
//   - one read buffer per connection, so pipelined requests are all answered in order (httplib
//     builds a new stream, and drops what its buffer held, for each request);
//   - a reserve: connections beyond the general threads (every streaming, waiting and reading
//     request holds one) get one of `reserve_threads` extra threads, a short header deadline,
//     and only /health, /v1/health and /metrics; anything else there is a 503 "busy";
//   - a half-closed client (it shut down its sending side after the request) still gets its
//     answer: only a failed write ends a response, not the end of the client's input.
#pragma once
#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <string>

namespace clover::server {

struct HttpLimits {
  int header_timeout_s = 10;     // request line + headers, from the request's first byte
  int body_timeout_s = 30;       // the whole body, from the end of the headers
  int reserve_header_timeout_s = 2;
  size_t max_header_bytes = 64u << 10;
  size_t max_body_bytes = 16u << 20;  // larger bodies: 413 before they are read
  int general_threads = 16;      // connections served in full
  int reserve_threads = 4;       // extra connections: health and metrics only
};

// Why the current connection's request could not be read (for the error handler, which turns
// cpp-httplib's generic 400 into the right status and message).
enum class ReadFailure { None, Timeout, HeadersTooLarge, ControlByte };

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(HttpLimits limits);

  const HttpLimits& limits() const { return limits_; }

  // The read failure of the request being handled on this thread (None outside a connection).
  static ReadFailure current_read_failure();
  // Whether this thread serves a reserve connection (health and metrics only).
  static bool current_is_reserve();
  // The socket of this thread's connection (-1 outside a connection).
  static int current_socket();

  // After bind: cpp-httplib listens with a backlog of 5, so a burst of connections beyond that
  // waits for the clients' SYN retries (1 s, then 3 s); listen() again widens it.
  void widen_backlog(int backlog = 1024);

 private:
  bool process_and_close_socket(socket_t sock) override;
  bool stopping() const { return svr_sock_ == INVALID_SOCKET; }

  HttpLimits limits_;
  std::atomic<int> active_{0};
  friend class ConnStream;
};

// The body of a 4xx/5xx error answer in the server's JSON shape (api_error.h), for errors the
// loop writes itself.
std::string raw_error_response(int status, const std::string& type, const std::string& message);

}  // namespace clover::server
