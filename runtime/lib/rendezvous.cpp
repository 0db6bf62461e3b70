//===- rendezvous.cpp - A few bytes from rank 0 to every rank over TCP ---===//
#include "rendezvous.h"

#include "error.h"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace dtc::rt {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[8] = {'D', 'T', 'C', 'R', 'D', 'Z', 'V', '1'};
constexpr size_t kMaxBytes = 4096;

struct Hello {
  char magic[8];
  int32_t rank, worldSize;
};

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

int millisLeft(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : int(std::min<long long>(left, 1 << 30));
}

// Waits until fd is readable/writable; false at the deadline.
bool waitFor(int fd, short events, Clock::time_point deadline) {
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
bool transfer(int fd, void *buf, size_t n, bool write, Clock::time_point deadline) {
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

void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

struct AddrInfo {
  addrinfo *list = nullptr;
  ~AddrInfo() {
    if (list)
      ::freeaddrinfo(list);
  }
};

void serve(int worldSize, int port, double timeoutSeconds, const void *data, size_t bytes,
           Clock::time_point deadline) {
  AddrInfo ai;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(nullptr, service.c_str(), &hints, &ai.list))
    throw Error(fmt::format("rendezvous: cannot resolve the port {}: {}", port, gai_strerror(rc)));
  // Prefer an IPv6 socket that also accepts IPv4 (every address), else IPv4.
  Fd server;
  std::string lastError = "no address";
  for (int pass = 0; pass < 2 && server.get() < 0; ++pass)
    for (addrinfo *a = ai.list; a && server.get() < 0; a = a->ai_next) {
      if ((pass == 0) != (a->ai_family == AF_INET6))
        continue;
      Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (fd.get() < 0) {
        lastError = std::strerror(errno);
        continue;
      }
      int one = 1, zero = 0;
      ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (a->ai_family == AF_INET6)
        ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 ||
          ::listen(fd.get(), std::max(worldSize, 16)) != 0) {
        lastError = std::strerror(errno);
        continue;
      }
      setNonBlocking(fd.get());
      server = std::move(fd);
    }
  if (server.get() < 0)
    throw Error(fmt::format("rendezvous: rank 0 cannot listen on port {}: {} (set "
                            "DTC_RENDEZVOUS_PORT to a free port, the same on every rank)",
                            port, lastError));
  std::vector<char> seen(size_t(worldSize), 0);
  int missing = worldSize - 1;
  std::vector<char> reply(sizeof kMagic + bytes);
  std::memcpy(reply.data(), kMagic, sizeof kMagic);
  std::memcpy(reply.data() + sizeof kMagic, data, bytes);
  while (missing > 0) {
    if (!waitFor(server.get(), POLLIN, deadline))
      throw Error(fmt::format("rendezvous: {} of {} ranks did not connect to rank 0 (port {}) "
                              "within {:g} s; start every rank with the same MASTER_ADDR, "
                              "MASTER_PORT and WORLD_SIZE",
                              missing, worldSize - 1, port, timeoutSeconds));
    Fd peer(::accept4(server.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (peer.get() < 0)
      continue; // EAGAIN, or the peer went away
    // A peer that connects but says nothing within 10 s is dropped (e.g. a
    // port scanner); a rank retries.
    const auto helloDeadline = std::min(deadline, Clock::now() + std::chrono::seconds(10));
    Hello h;
    if (!transfer(peer.get(), &h, sizeof h, false, helloDeadline) ||
        std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
      continue;
    if (h.worldSize != worldSize)
      throw Error(fmt::format("rendezvous: rank {} runs with WORLD_SIZE={}, rank 0 with {}",
                              h.rank, h.worldSize, worldSize));
    if (h.rank < 1 || h.rank >= worldSize || seen[size_t(h.rank)])
      throw Error(fmt::format("rendezvous: two ranks claim RANK={} (or it is out of range)",
                              h.rank));
    if (!transfer(peer.get(), reply.data(), reply.size(), true, helloDeadline))
      continue;
    seen[size_t(h.rank)] = 1;
    --missing;
  }
}

// One attempt: connects, says hello and receives the bytes. False when
// rank 0 is not listening (yet) or the exchange broke off.
bool fetch(int rank, int worldSize, const std::string &host, int port, void *data, size_t bytes,
           Clock::time_point deadline, std::string *lastError) {
  AddrInfo ai;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &ai.list)) {
    *lastError = fmt::format("cannot resolve '{}': {}", host, gai_strerror(rc));
    return false;
  }
  for (addrinfo *a = ai.list; a; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (fd.get() < 0) {
      *lastError = std::strerror(errno);
      continue;
    }
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        *lastError = std::strerror(errno);
        continue;
      }
      const auto connectDeadline = std::min(deadline, Clock::now() + std::chrono::seconds(2));
      int err = 0;
      socklen_t len = sizeof err;
      if (!waitFor(fd.get(), POLLOUT, connectDeadline) ||
          ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        *lastError = err ? std::strerror(err) : "connection timed out";
        continue;
      }
    }
    Hello h;
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.rank = rank;
    h.worldSize = worldSize;
    std::vector<char> reply(sizeof kMagic + bytes);
    if (!transfer(fd.get(), &h, sizeof h, true, deadline) ||
        !transfer(fd.get(), reply.data(), reply.size(), false, deadline) ||
        std::memcmp(reply.data(), kMagic, sizeof kMagic) != 0) {
      *lastError = "rank 0 closed the connection (it may have refused this rank)";
      continue;
    }
    std::memcpy(data, reply.data() + sizeof kMagic, bytes);
    return true;
  }
  return false;
}

} // namespace

void rendezvousBroadcast(int rank, int worldSize, const std::string &host, int port,
                         double timeoutSeconds, void *data, size_t bytes) {
  if (worldSize < 1 || rank < 0 || rank >= worldSize || bytes > kMaxBytes || port < 1 ||
      port > 65535)
    throw Error(fmt::format("rendezvous: invalid configuration (rank {}, world size {}, port {})",
                            rank, worldSize, port));
  if (worldSize == 1)
    return;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeoutSeconds));
  if (rank == 0) {
    serve(worldSize, port, timeoutSeconds, data, bytes, deadline);
    return;
  }
  std::string lastError = "no attempt";
  while (!fetch(rank, worldSize, host, port, data, bytes, deadline, &lastError)) {
    if (Clock::now() >= deadline)
      throw Error(fmt::format("rendezvous: rank {} could not reach rank 0 at {}:{} within {:g} s "
                              "({}); start every rank with the same MASTER_ADDR and MASTER_PORT",
                              rank, host, port, timeoutSeconds, lastError));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

} // namespace dtc::rt
