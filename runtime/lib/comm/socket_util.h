//===- socket_util.h - TCP helpers for the rendezvous and the gloo store --===//
//
// Non-blocking sockets with deadlines, shared by rendezvous.cpp (torchrun's
// NCCL id exchange) and libdtcrt_gloo.so's key-value store. Header-only and
// exception-free (errors come back as strings), so that the plugin can use
// it without linking libdtcrt.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace dtc::rt::net {

using Clock = std::chrono::steady_clock;

class Fd {
public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd &&o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd &operator=(Fd &&o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

private:
  int fd_;
};

inline int millisLeft(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : int(std::min<long long>(left, 1 << 30));
}

// Waits until fd is readable/writable; false at the deadline.
inline bool waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, millisLeft(deadline));
    if (rc > 0)
      return true;
    if (rc == 0)
      return false;
    if (errno != EINTR)
      return false;
  }
}

// Reads or writes exactly n bytes on a non-blocking socket before the
// deadline; false on timeout, error or end of stream.
inline bool transfer(int fd, void *buf, size_t n, bool write, Clock::time_point deadline) {
  char *p = static_cast<char *>(buf);
  while (n > 0) {
    if (!waitFor(fd, write ? POLLOUT : POLLIN, deadline))
      return false;
    const ssize_t k = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
      continue;
    if (k <= 0)
      return false;
    p += k;
    n -= size_t(k);
  }
  return true;
}

inline void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

struct AddrInfo {
  addrinfo *list = nullptr;
  AddrInfo() = default;
  AddrInfo(const AddrInfo &) = delete;
  AddrInfo &operator=(const AddrInfo &) = delete;
  ~AddrInfo() {
    if (list)
      ::freeaddrinfo(list);
  }
};

// A non-blocking socket listening on `port` on every address (an IPv6
// socket that also accepts IPv4 when there is one, else IPv4); an invalid
// Fd and *error when it cannot listen.
inline Fd listenTcp(int port, int backlog, std::string *error) {
  AddrInfo ai;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(nullptr, service.c_str(), &hints, &ai.list)) {
    *error = std::string("cannot resolve the port: ") + gai_strerror(rc);
    return Fd();
  }
  *error = "no address";
  for (int pass = 0; pass < 2; ++pass)
    for (addrinfo *a = ai.list; a; a = a->ai_next) {
      if ((pass == 0) != (a->ai_family == AF_INET6))
        continue;
      Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (fd.get() < 0) {
        *error = std::strerror(errno);
        continue;
      }
      int one = 1, zero = 0;
      ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (a->ai_family == AF_INET6)
        ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), backlog) != 0) {
        *error = std::strerror(errno);
        continue;
      }
      setNonBlocking(fd.get());
      return fd;
    }
  return Fd();
}

// One attempt to connect to host:port (each of its addresses, at most 2 s
// each and before the deadline); a connected non-blocking socket, else an
// invalid Fd and *error (e.g. "Connection refused" while nobody listens yet).
inline Fd connectTcp(const std::string &host, int port, Clock::time_point deadline,
                     std::string *error) {
  AddrInfo ai;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &ai.list)) {
    *error = "cannot resolve '" + host + "': " + gai_strerror(rc);
    return Fd();
  }
  for (addrinfo *a = ai.list; a; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (fd.get() < 0) {
      *error = std::strerror(errno);
      continue;
    }
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        *error = std::strerror(errno);
        continue;
      }
      const auto connectDeadline = std::min(deadline, Clock::now() + std::chrono::seconds(2));
      int err = 0;
      socklen_t len = sizeof err;
      if (!waitFor(fd.get(), POLLOUT, connectDeadline) ||
          ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        *error = err ? std::strerror(err) : "connection timed out";
        continue;
      }
    }
    return fd;
  }
  return Fd();
}

} // namespace dtc::rt::net
