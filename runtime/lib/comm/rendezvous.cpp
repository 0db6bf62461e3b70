//===- rendezvous.cpp - A few bytes from rank 0 to every rank over TCP ---===//
#include "comm/rendezvous.h"

#include "support/error.h"
#include "comm/socket_util.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <sys/socket.h>
#include <thread>
#include <vector>

namespace dtc::rt {
namespace {

using net::Clock;
using net::Fd;
using net::transfer;
using net::waitFor;
constexpr char kMagic[8] = {'D', 'T', 'C', 'R', 'D', 'Z', 'V', '1'};
constexpr size_t kMaxBytes = 4096;

struct Hello {
  char magic[8];
  int32_t rank, worldSize;
};

void serve(int worldSize, int port, double timeoutSeconds, const void *data, size_t bytes,
           Clock::time_point deadline) {
  std::string lastError;
  Fd server = net::listenTcp(port, std::max(worldSize, 16), &lastError);
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
  Fd fd = net::connectTcp(host, port, deadline, lastError);
  if (fd.get() < 0)
    return false;
  Hello h;
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.rank = rank;
  h.worldSize = worldSize;
  std::vector<char> reply(sizeof kMagic + bytes);
  if (!transfer(fd.get(), &h, sizeof h, true, deadline) ||
      !transfer(fd.get(), reply.data(), reply.size(), false, deadline) ||
      std::memcmp(reply.data(), kMagic, sizeof kMagic) != 0) {
    *lastError = "rank 0 closed the connection (it may have refused this rank)";
    return false;
  }
  std::memcpy(data, reply.data() + sizeof kMagic, bytes);
  return true;
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
