#include "server/client_socket.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>

#include "server/http_server.h"

namespace clover::server {

ClientSocket::ClientSocket(const httplib::Request&) : fd_(HttpServer::current_socket()) {}

PeerState ClientSocket::state() const {
  if (fd_ < 0) return PeerState::Open;
  char c;
  const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return PeerState::Open;
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? PeerState::Open : PeerState::Gone;
  // End of input. After a reset the socket is closed (a peek still reads end of input).
  tcp_info ti{};
  socklen_t len = sizeof ti;
  if (getsockopt(fd_, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_state == TCP_CLOSE) return PeerState::Gone;
  return PeerState::InputEnded;
}

bool ClientSocket::send_raw(std::string_view bytes) const {
  if (fd_ < 0) return false;
  return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(bytes.size());
}

}  // namespace clover::server
