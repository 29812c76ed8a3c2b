#include "server/client_socket.h"

#include <cerrno>
#include <cstdlib>
#include <dirent.h>
#include <netdb.h>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>

namespace clover::server {

namespace {

// The numeric host and the port of a socket address (as httplib writes remote_addr).
bool host_port(const sockaddr_storage& a, socklen_t len, std::string& host, int& port) {
  char h[NI_MAXHOST], p[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, h, sizeof h, p, sizeof p, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  host = h;
  port = std::atoi(p);
  return true;
}

}  // namespace

ClientSocket::ClientSocket(const httplib::Request& req) {
  if (req.remote_port < 0 || req.local_port < 0) return;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t llen = sizeof local, plen = sizeof peer;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &llen) != 0) continue;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &plen) != 0) continue;  // listening
    std::string lh, ph;
    int lp = -1, pp = -1;
    if (!host_port(local, llen, lh, lp) || !host_port(peer, plen, ph, pp)) continue;
    if (lp == req.local_port && pp == req.remote_port && ph == req.remote_addr) {
      fd_ = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
}

bool ClientSocket::closed() const {
  if (fd_ < 0) return false;
  char c;
  const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;
  if (n == 0) return true;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace clover::server
