#include "server/http_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "server/api_error.h"

namespace clover::server {

using Clock = std::chrono::steady_clock;

namespace {

// Slice of every wait, so that a stopping server is noticed within this much.
constexpr int kPollSliceMs = 100;

void addr_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  char h[NI_MAXHOST], p[NI_MAXSERV];
  if (rc != 0 ||
      getnameinfo(reinterpret_cast<sockaddr*>(&a), len, h, sizeof h, p, sizeof p, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    ip.clear();
    port = -1;
    return;
  }
  ip = h;
  port = std::atoi(p);
}

}  // namespace

// One connection's socket, with a read buffer that lives as long as the connection and the
// deadlines of the request being read.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(int fd, const HttpServer& srv, bool reserve) : fd_(fd), srv_(srv), reserve_(reserve) {
    addr_of(fd, true, remote_ip_, remote_port_);
    addr_of(fd, false, local_ip_, local_port_);
  }

  // Waits up to `idle` for the first byte of the next request; false when none came (idle,
  // closed, or the server is stopping).
  bool wait_for_request(std::chrono::milliseconds idle) {
    if (beg_ < end_) return true;
    return fill(Clock::now() + idle);
  }

  void begin_request() {
    header_phase_ = true;
    header_bytes_ = 0;
    tail_ = 0;
    failure_ = ReadFailure::None;
    const int t = reserve_ ? srv_.limits().reserve_header_timeout_s : srv_.limits().header_timeout_s;
    deadline_ = Clock::now() + std::chrono::seconds(t);
  }

  ReadFailure failure() const { return failure_; }
  bool reserve() const { return reserve_; }

  bool is_readable() const override {
    if (beg_ < end_) return true;
    if (poll_for(POLLIN, std::min(deadline_, Clock::now() + read_timeout()))) return true;
    note_timeout();
    return false;
  }
  bool is_writable() const override { return poll_for(POLLOUT, Clock::now() + write_timeout()); }

  ssize_t read(char* ptr, size_t size) override {
    if (failure_ != ReadFailure::None) return -1;
    if (beg_ == end_ && !fill(std::min(deadline_, Clock::now() + read_timeout()))) {
      note_timeout();
      return failure_ != ReadFailure::None ? -1 : (eof_ ? 0 : -1);
    }
    const size_t n = std::min(size, end_ - beg_);
    if (header_phase_ && !scan_header_bytes(buf_ + beg_, n)) return -1;
    std::memcpy(ptr, buf_ + beg_, n);
    beg_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    while (done < size) {
      if (!is_writable()) return done > 0 ? static_cast<ssize_t>(done) : -1;
      const ssize_t n = ::send(fd_, ptr + done, size - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return done > 0 ? static_cast<ssize_t>(done) : -1;
      done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(done);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = remote_ip_;
    port = remote_port_;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = local_ip_;
    port = local_port_;
  }
  socket_t socket() const override { return fd_; }

 private:
  std::chrono::seconds read_timeout() const { return std::chrono::seconds(std::max<time_t>(srv_.read_timeout_sec_, 1)); }
  std::chrono::seconds write_timeout() const { return std::chrono::seconds(std::max<time_t>(srv_.write_timeout_sec_, 1)); }

  // A read that ended at the request's deadline (not at the end of input) timed out.
  void note_timeout() const {
    if (!eof_ && failure_ == ReadFailure::None && Clock::now() >= deadline_) failure_ = ReadFailure::Timeout;
  }

  // Polls in slices until `events` is ready, `until` passes, or the server stops.
  bool poll_for(short events, Clock::time_point until) const {
    while (!srv_.stopping()) {
      // Rounded up: a wait that ends early would not be seen as the deadline passing.
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd_, events, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, kPollSliceMs)));
      if (rc < 0 && errno != EINTR) return false;
      if (rc > 0) return (p.revents & (events | POLLHUP)) != 0 && !(events == POLLOUT && (p.revents & POLLERR));
    }
    return false;
  }

  // Reads more into the (empty) buffer; false on end of input, an error, or `until`.
  bool fill(Clock::time_point until) {
    beg_ = end_ = 0;
    if (eof_ || !poll_for(POLLIN, until)) return false;
    ssize_t n;
    do n = ::recv(fd_, buf_, sizeof buf_, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    end_ = static_cast<size_t>(n);
    return true;
  }

  // Request line and headers as httplib consumes them: their size, their bytes, and their end
  // (an empty line), after which the body deadline starts.
  bool scan_header_bytes(const char* p, size_t n) {
    for (size_t i = 0; i < n && header_phase_; ++i) {
      const unsigned char c = static_cast<unsigned char>(p[i]);
      if (c == 0 || (c < 0x20 && c != '\r' && c != '\n' && c != '\t') || c == 0x7f) {
        failure_ = ReadFailure::ControlByte;
        return false;
      }
      if (++header_bytes_ > srv_.limits().max_header_bytes) {
        failure_ = ReadFailure::HeadersTooLarge;
        return false;
      }
      // The headers end at "\n\r\n" or "\n\n" (httplib accepts bare LF line ends).
      if (c == '\n' && (tail_ == 1 || tail_ == 2)) {
        header_phase_ = false;
        deadline_ = Clock::now() + std::chrono::seconds(srv_.limits().body_timeout_s);
      }
      tail_ = c == '\n' ? 1 : (c == '\r' && tail_ == 1) ? 2 : 0;
    }
    return true;
  }

  int fd_;
  const HttpServer& srv_;
  bool reserve_;
  std::string remote_ip_, local_ip_;
  int remote_port_ = -1, local_port_ = -1;
  char buf_[16384];
  size_t beg_ = 0, end_ = 0;
  bool eof_ = false;
  bool header_phase_ = true;
  size_t header_bytes_ = 0;
  int tail_ = 0;  // 1: the last header byte was '\n', 2: it was "\n\r"
  mutable ReadFailure failure_ = ReadFailure::None;  // set by the const is_readable() too
  Clock::time_point deadline_ = Clock::now();
};

namespace {
thread_local const ConnStream* tl_conn = nullptr;
}

HttpServer::HttpServer(HttpLimits limits) : limits_(limits) {
  set_payload_max_length(limits_.max_body_bytes);
  // One thread per connection: the general ones plus the reserve.
  const size_t n = static_cast<size_t>(limits_.general_threads + limits_.reserve_threads);
  new_task_queue = [n] { return new httplib::ThreadPool(n); };
  // SO_REUSEADDR only (httplib's default adds SO_REUSEPORT, with which a second server binds
  // the same port and the kernel splits the connections between the two).
  set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
}

void HttpServer::widen_backlog(int backlog) {
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, backlog);
}

ReadFailure HttpServer::current_read_failure() { return tl_conn ? tl_conn->failure() : ReadFailure::None; }
bool HttpServer::current_is_reserve() { return tl_conn && tl_conn->reserve(); }
int HttpServer::current_socket() { return tl_conn ? tl_conn->socket() : -1; }

std::string raw_error_response(int status, const std::string& type, const std::string& message) {
  const std::string body = ApiError(status, type, message).body().dump();
  const char* reason = status == 408 ? "Request Timeout" : status == 503 ? "Service Unavailable" : "Error";
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  const bool reserve = active_.fetch_add(1) >= limits_.general_threads;
  {
    ConnStream conn(sock, *this, reserve);
    tl_conn = &conn;
    const auto idle = std::chrono::seconds(std::max<time_t>(keep_alive_timeout_sec_, 1));
    for (size_t n = reserve ? 1 : keep_alive_max_count_; n > 0 && !stopping(); --n) {
      if (!conn.wait_for_request(idle)) break;
      conn.begin_request();
      bool closed = false;
      const bool ok = process_request(conn, n == 1 || reserve, closed, nullptr);
      if (!ok && conn.failure() == ReadFailure::Timeout) {
        // The request line itself did not arrive in time: httplib wrote nothing.
        const std::string r = raw_error_response(408, "timeout_error", "the request was not received in time");
        conn.write(r.data(), r.size());
      }
      if (!ok || closed || conn.failure() != ReadFailure::None) break;
    }
    tl_conn = nullptr;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  active_.fetch_sub(1);
  return true;
}

}  // namespace clover::server
