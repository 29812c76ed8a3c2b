// Whether the client of a request is still there, for requests that write nothing until the end
// (non-streaming completions) or for a while (streams of tokens without text), so that a client
// that gave up frees its slot at once.
//
// The socket is the one the current thread's connection loop serves (http_server.h). The end of
// the client's input alone does not mean it left: a client may shut down its sending side after
// the request and wait for the answer (a half-close). So the first time the input is seen to end,
// the caller sends something the client ignores (a 102 interim response before the answer, an
// SSE comment inside a stream); a client that closed the connection answers it with a reset,
// which the next check sees as the connection gone.
#pragma once
#include <httplib.h>

#include <string_view>

namespace clover::server {

enum class PeerState { Open, InputEnded, Gone };

class ClientSocket {
 public:
  explicit ClientSocket(const httplib::Request& req);
  bool found() const { return fd_ >= 0; }
  // Open: connected (bytes of a pipelined next request count as open). InputEnded: the client
  // sent its end of input; send it a probe. Gone: the connection was reset or failed.
  PeerState state() const;
  // Writes bytes straight to the socket (the 102 interim response); false when that failed.
  bool send_raw(std::string_view bytes) const;

 private:
  int fd_ = -1;
};

// One watcher per request: cancels when the client is gone, probing once on end of input.
class ClientWatch {
 public:
  explicit ClientWatch(const httplib::Request& req) : sock_(req) {}
  // `probe` sends the bytes the client ignores; returns false when it could not.
  template <class Probe>
  bool gone(Probe&& probe) {
    const PeerState s = sock_.state();
    if (s == PeerState::Gone) return true;
    if (s == PeerState::InputEnded && !probed_) {
      probed_ = true;
      return !probe(sock_);
    }
    return false;
  }

 private:
  ClientSocket sock_;
  bool probed_ = false;
};

}  // namespace clover::server
