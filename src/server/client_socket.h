// Whether the client of a request is still connected, for requests that write nothing until the
// end (non-streaming completions) or for a while (streams of tokens without text), so that a
// client that gave up frees its slot at once.
//
// cpp-httplib 0.11 (Debian's) gives a handler neither the socket nor a "connection closed" signal
// (Request::is_connection_closed came in 0.12), and the hook that sees each accepted socket
// (Server::process_and_close_socket) is private. A Request does carry both ends' addresses and
// ports, which name the TCP connection, so the socket is found among the process's descriptors by
// matching them (getsockname/getpeername), once per request.
#pragma once
#include <httplib.h>

namespace clover::server {

class ClientSocket {
 public:
  explicit ClientSocket(const httplib::Request& req);
  bool found() const { return fd_ >= 0; }
  // True once the peer closed or reset the connection (a peek reads end-of-stream or an error).
  // Bytes of a pipelined next request do not count as closed.
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace clover::server
