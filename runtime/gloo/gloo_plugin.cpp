//===- gloo_plugin.cpp - libdtcrt_gloo.so: gloo behind the plugin table ---===//
//
// The CPU backend for jobs that no MPI launcher started: torchrun's ranks
// and TF_CONFIG's workers. Loaded with dlopen by libdtcrt (comm_mpi.cpp) like
// libdtcrt_mpi.so, with the same table (lib/comm/mpi_plugin.h); libdtcrt's
// communication thread makes every call. setRendezvous says who this rank
// is and where rank 0 serves the rendezvous; init then meets the others
// through a small TCP key-value store that rank 0 serves on that port (this
// gloo has file, hash and redis stores but no TCP one), connects a full
// mesh of gloo TCP pairs, and finds the ranks on this host. Every gloo
// exception becomes the function's error string.
//
//===----------------------------------------------------------------------===//
#include "comm/mpi_plugin.h"
#include "comm/socket_util.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <csignal>
#include <netdb.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

using namespace dtc::rt::net;

constexpr char kMagic[8] = {'D', 'T', 'C', 'G', 'L', 'S', 'T', '1'};
// Requests and values are the few hundred bytes of gloo's addresses.
constexpr uint32_t kMaxField = 1 << 20;

struct Config {
  bool set = false;
  int rank = 0, size = 1, port = 0;
  std::string host;
  double timeoutSeconds = 120;
} config;

std::shared_ptr<gloo::transport::Device> device;
std::shared_ptr<gloo::rendezvous::Context> context;
uint32_t nextTag = 0; // every rank issues the same collectives in the same order

std::chrono::milliseconds timeoutMs() {
  return std::chrono::milliseconds(int64_t(config.timeoutSeconds * 1000) + 1);
}

std::string rdzvWhere() { return config.host + ":" + std::to_string(config.port); }

//===--- the store's wire format ----------------------------------------===//
// Hello: magic, int32 rank, int32 size; answer: magic, int32 0 (accepted) or
// rank 0's world size (refused). Then requests: 'S' key value (answer: 1
// byte), 'G' key (answer: 1 byte found, and if found the value). key and
// value: uint32 length, bytes.

struct Hello {
  char magic[8];
  int32_t rank, size;
};

bool sendField(int fd, const void *p, uint32_t n, Clock::time_point deadline) {
  return transfer(fd, &n, sizeof n, true, deadline) &&
         (n == 0 || transfer(fd, const_cast<void *>(p), n, true, deadline));
}
bool recvField(int fd, std::vector<char> *out, Clock::time_point deadline) {
  uint32_t n = 0;
  if (!transfer(fd, &n, sizeof n, false, deadline) || n > kMaxField)
    return false;
  out->resize(n);
  return n == 0 || transfer(fd, out->data(), n, false, deadline);
}

//===--- rank 0: the server ------------------------------------------------===//

class StoreServer {
public:
  StoreServer(int size, int port) : size_(size), seen_(size_t(size), 0) {
    std::string error;
    listen_ = listenTcp(port, std::max(size, 16), &error);
    if (listen_.get() < 0)
      throw std::runtime_error(
          "rank 0 cannot listen on port " + std::to_string(port) + " for the rendezvous: " + error +
          " (choose another MASTER_PORT or DTC_RENDEZVOUS_PORT, or TF_CONFIG's first port, "
          "free on rank 0's host)");
    thread_ = std::thread([this] { run(); });
  }
  ~StoreServer() {
    stop_ = true;
    thread_.join();
  }

  void set(const std::string &key, std::vector<char> value) {
    std::lock_guard<std::mutex> lock(m_);
    map_[key] = std::move(value);
  }
  bool get(const std::string &key, std::vector<char> *value) {
    std::lock_guard<std::mutex> lock(m_);
    auto it = map_.find(key);
    if (it == map_.end())
      return false;
    *value = it->second;
    return true;
  }
  // A rank that cannot join this job (another world size, a rank claimed
  // twice): rank 0 stops with it.
  std::string error() {
    std::lock_guard<std::mutex> lock(m_);
    return error_;
  }

private:
  void fail(std::string e) {
    std::lock_guard<std::mutex> lock(m_);
    if (error_.empty())
      error_ = std::move(e);
  }

  void run() {
    struct Client {
      Fd fd;
      bool greeted = false;
    };
    std::vector<Client> clients;
    while (!stop_) {
      std::vector<pollfd> fds{{listen_.get(), POLLIN, 0}};
      for (const Client &c : clients)
        fds.push_back({c.fd.get(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 50) <= 0)
        continue;
      if (fds[0].revents & POLLIN) {
        Fd peer(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (peer.get() >= 0)
          clients.push_back({std::move(peer), false});
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
          continue;
        Client &c = clients[i - 1];
        // Peers send whole messages at once; one that stalls for 10 s (or
        // is not a rank, e.g. a port scanner) is dropped.
        if (!serve(c.fd.get(), &c.greeted, Clock::now() + std::chrono::seconds(10)))
          c.fd.reset();
      }
      for (size_t i = clients.size(); i-- > 0;)
        if (clients[i].fd.get() < 0)
          clients.erase(clients.begin() + ptrdiff_t(i));
    }
  }

  // One message from a peer; false: close the connection.
  bool serve(int fd, bool *greeted, Clock::time_point deadline) {
    if (!*greeted) {
      Hello h;
      if (!transfer(fd, &h, sizeof h, false, deadline) ||
          std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
        return false;
      Hello answer;
      std::memcpy(answer.magic, kMagic, sizeof kMagic);
      answer.rank = 0;
      answer.size = 0;
      if (h.size != size_) {
        answer.size = size_;
        fail("rank " + std::to_string(h.rank) + " runs with a world size of " +
             std::to_string(h.size) + ", rank 0 with " + std::to_string(size_));
      } else if (h.rank < 1 || h.rank >= size_ || seen_[size_t(h.rank)]) {
        answer.size = -1;
        fail("two ranks claim rank " + std::to_string(h.rank) +
             " (or it is out of range); give every process its own rank");
      } else {
        seen_[size_t(h.rank)] = 1;
      }
      if (!transfer(fd, &answer, sizeof answer, true, deadline))
        return false;
      *greeted = answer.size == 0;
      return *greeted;
    }
    char op = 0;
    std::vector<char> key, value;
    if (!transfer(fd, &op, 1, false, deadline) || !recvField(fd, &key, deadline))
      return false;
    const std::string k(key.begin(), key.end());
    if (op == 'S') {
      if (!recvField(fd, &value, deadline))
        return false;
      set(k, std::move(value));
      char ok = 1;
      return transfer(fd, &ok, 1, true, deadline);
    }
    if (op == 'G') {
      char found = get(k, &value) ? 1 : 0;
      return transfer(fd, &found, 1, true, deadline) &&
             (!found || sendField(fd, value.data(), uint32_t(value.size()), deadline));
    }
    return false;
  }

  const int size_;
  std::vector<char> seen_;
  Fd listen_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex m_;
  std::map<std::string, std::vector<char>> map_;
  std::string error_;
};

//===--- every rank: the store gloo sees ----------------------------------===//

// Rank 0 reads and writes its server's map directly; the others talk to it
// over one connection, made (retrying until rank 0 listens) before the
// deadline. Every wait ends at the rendezvous deadline at the latest.
class TcpStore final : public gloo::rendezvous::Store {
public:
  TcpStore(StoreServer *server, Clock::time_point deadline) : server_(server), deadline_(deadline) {
    if (server_)
      return;
    std::string lastError = "no attempt";
    for (;;) {
      fd_ = connectTcp(config.host, config.port, deadline_, &lastError);
      if (fd_.get() >= 0 && greet(&lastError))
        break;
      fd_.reset();
      if (Clock::now() >= deadline_)
        throw std::runtime_error("rank " + std::to_string(config.rank) +
                                 " could not reach rank 0 at " + rdzvWhere() + " within " +
                                 seconds() + " (" + lastError +
                                 "); start every rank with the same rendezvous address "
                                 "(MASTER_ADDR and MASTER_PORT, or TF_CONFIG's first worker)");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  void set(const std::string &key, const std::vector<char> &data) override {
    if (server_) {
      server_->set(key, data);
      return;
    }
    char op = 'S', ok = 0;
    if (!transfer(fd_.get(), &op, 1, true, deadline_) ||
        !sendField(fd_.get(), key.data(), uint32_t(key.size()), deadline_) ||
        !sendField(fd_.get(), data.data(), uint32_t(data.size()), deadline_) ||
        !transfer(fd_.get(), &ok, 1, false, deadline_))
      lost();
  }

  std::vector<char> get(const std::string &key) override {
    std::vector<char> value;
    waitFor(key, deadline_, &value);
    return value;
  }

  void wait(const std::vector<std::string> &keys) override { wait(keys, timeoutMs()); }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override {
    const auto deadline = std::min(deadline_, Clock::now() + timeout);
    std::vector<char> value;
    for (const std::string &key : keys)
      waitFor(key, deadline, &value);
  }

private:
  std::string seconds() const {
    char s[32];
    std::snprintf(s, sizeof s, "%g s", config.timeoutSeconds);
    return s;
  }

  bool greet(std::string *error) {
    Hello h;
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.rank = config.rank;
    h.size = config.size;
    Hello answer;
    if (!transfer(fd_.get(), &h, sizeof h, true, deadline_) ||
        !transfer(fd_.get(), &answer, sizeof answer, false, deadline_) ||
        std::memcmp(answer.magic, kMagic, sizeof kMagic) != 0) {
      *error = "the connection to rank 0 broke off";
      return false;
    }
    if (answer.size > 0)
      throw std::runtime_error("rank 0 runs with a world size of " + std::to_string(answer.size) +
                               ", rank " + std::to_string(config.rank) + " with " +
                               std::to_string(config.size) + "; give every rank the same one");
    if (answer.size < 0)
      throw std::runtime_error("rank 0 refused rank " + std::to_string(config.rank) +
                               ": another process claims that rank");
    return true;
  }

  [[noreturn]] void lost() {
    throw std::runtime_error("rank " + std::to_string(config.rank) +
                             " lost its connection to rank 0's rendezvous at " + rdzvWhere());
  }

  // Polls for the key until it exists (gloo's addresses appear as ranks
  // arrive) or the deadline passes.
  void waitFor(const std::string &key, Clock::time_point deadline, std::vector<char> *value) {
    for (;;) {
      if (server_) {
        std::string e = server_->error();
        if (!e.empty())
          throw std::runtime_error(e);
        if (server_->get(key, value))
          return;
      } else {
        char op = 'G', found = 0;
        if (!transfer(fd_.get(), &op, 1, true, deadline_) ||
            !sendField(fd_.get(), key.data(), uint32_t(key.size()), deadline_) ||
            !transfer(fd_.get(), &found, 1, false, deadline_) ||
            (found && !recvField(fd_.get(), value, deadline_)))
          lost();
        if (found)
          return;
      }
      if (Clock::now() >= deadline)
        throw std::runtime_error(
            "the ranks did not all meet at " + rdzvWhere() + " within " + seconds() + " (rank " +
            std::to_string(config.rank) + " waited for '" + key + "'); start all " +
            std::to_string(config.size) + " ranks with the same rendezvous address and world size");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  StoreServer *server_;
  Clock::time_point deadline_;
  Fd fd_;
};

//===--- the plugin's functions -------------------------------------------===//

int fail(char *err, size_t errLen, const char *what, const char *message) {
  std::snprintf(err, errLen, "%s%s%s", what, *what ? ": " : "", message);
  return 1;
}

// Runs fn, turning any exception (gloo::Exception, gloo::IoException,
// gloo's EnforceNotMet, ...) into the error string.
template <class Fn> int guarded(char *err, size_t errLen, const char *what, Fn fn) {
  try {
    fn();
    return 0;
  } catch (const std::exception &e) {
    return fail(err, errLen, what, e.what());
  } catch (...) {
    return fail(err, errLen, what, "unknown exception");
  }
}

// The address of this host on the route to `host` (the UDP socket sends
// nothing): what the other ranks can reach when they reach rank 0.
std::string localAddressTowards(const std::string &host, int port) {
  AddrInfo ai;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  const std::string service = std::to_string(port > 0 ? port : 1);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &ai.list))
    throw std::runtime_error("cannot resolve the rendezvous host '" + host +
                             "': " + gai_strerror(rc));
  std::string lastError = "no address";
  for (addrinfo *a = ai.list; a; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    char name[NI_MAXHOST] = "";
    if (fd.get() < 0 || ::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0 ||
        ::getsockname(fd.get(), reinterpret_cast<sockaddr *>(&local), &len) != 0) {
      lastError = std::strerror(errno);
      continue;
    }
    if (int rc = ::getnameinfo(reinterpret_cast<sockaddr *>(&local), len, name, sizeof name,
                               nullptr, 0, NI_NUMERICHOST)) {
      lastError = gai_strerror(rc);
      continue;
    }
    return name;
  }
  throw std::runtime_error("cannot find this host's address on the route to '" + host + "' (" +
                           lastError + "); set GLOO_SOCKET_IFNAME to the network interface to use");
}

int setRendezvous(int rank, int size, const char *host, int port, double timeoutSeconds, char *err,
                  size_t errLen) {
  if (size < 1 || rank < 0 || rank >= size || (size > 1 && (port < 1 || port > 65535)) ||
      !(timeoutSeconds > 0)) {
    std::snprintf(err, errLen, "invalid rendezvous (rank %d, world size %d, port %d)", rank, size,
                  port);
    return 1;
  }
  config.set = true;
  config.rank = rank;
  config.size = size;
  config.host = host && *host ? host : "127.0.0.1";
  config.port = port;
  config.timeoutSeconds = timeoutSeconds;
  return 0;
}

int init(int *rank, int *size, int *localRank, int *localSize, char *version, size_t versionLen,
         char *err, size_t errLen) {
  std::unique_ptr<StoreServer> server;
  return guarded(err, errLen, "", [&] {
    if (!config.set)
      throw std::runtime_error("internal error: the gloo plugin's init before setRendezvous");
    // This gloo writes to its sockets without MSG_NOSIGNAL: when a peer dies,
    // SIGPIPE would kill this rank before it could report anything. The
    // communication thread, and the threads gloo starts from it (its device
    // loop), block it: the write fails with EPIPE and gloo throws.
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(config.timeoutSeconds));
    gloo::transport::tcp::attr attr;
    const char *iface = std::getenv("GLOO_SOCKET_IFNAME");
    if (iface && *iface)
      attr.iface = iface;
    else
      attr.hostname = config.size > 1 ? localAddressTowards(config.host, config.port)
                                      : std::string("127.0.0.1");
    try {
      device = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception &e) {
      throw std::runtime_error(
          std::string("cannot create gloo's TCP device on ") +
          (attr.iface.empty() ? "address " + attr.hostname : "interface " + attr.iface) +
          " (GLOO_SOCKET_IFNAME chooses the interface): " + e.what());
    }
    context = std::make_shared<gloo::rendezvous::Context>(config.rank, config.size);
    context->setTimeout(timeoutMs());
    if (config.size > 1) {
      if (config.rank == 0)
        server = std::make_unique<StoreServer>(config.size, config.port);
      TcpStore store(server.get(), deadline);
      context->connectFullMesh(store, device);
    } else {
      gloo::rendezvous::HashStore store;
      context->connectFullMesh(store, device);
    }
    // The ranks on this host: the same host name.
    char name[256] = "";
    ::gethostname(name, sizeof name - 1);
    std::vector<char> names(sizeof name * size_t(config.size));
    gloo::AllgatherOptions opts(context);
    opts.setInput(name, sizeof name);
    opts.setOutput(names.data(), names.size());
    opts.setTag(nextTag++);
    opts.setTimeout(timeoutMs());
    gloo::allgather(opts); // after it every rank is done with the store
    *rank = config.rank;
    *size = config.size;
    *localRank = 0;
    *localSize = 0;
    for (int r = 0; r < config.size; ++r)
      if (std::strncmp(names.data() + sizeof name * size_t(r), name, sizeof name) == 0) {
        *localRank += r < config.rank;
        ++*localSize;
      }
    std::snprintf(version, versionLen, "gloo %d.%d.%d (tcp, %s)", GLOO_VERSION_MAJOR,
                  GLOO_VERSION_MINOR, GLOO_VERSION_PATCH, device->str().c_str());
  });
}

using ReduceFn = void (*)(void *, const void *, const void *, size_t);

template <class T> int allreduceSum(T *data, int64_t count, char *err, size_t errLen) {
  if (count <= 0)
    return 0;
  return guarded(err, errLen, "gloo allreduce", [&] {
    gloo::AllreduceOptions opts(context);
    opts.setOutput(data, size_t(count)); // in place: the output is the input
    opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<T>));
    opts.setTag(nextTag++);
    opts.setTimeout(timeoutMs());
    gloo::allreduce(opts);
  });
}

int allreduceFloatSum(float *data, int64_t count, char *err, size_t errLen) {
  return allreduceSum(data, count, err, errLen);
}

int allreduceDoubleSum(double *data, int64_t count, char *err, size_t errLen) {
  return allreduceSum(data, count, err, errLen);
}

// An out-of-place reduce-scatter's working copy (gloo reduces in its
// buffer, and data is to be left as it was); grows to the largest bucket.
std::vector<float> reduceScatterScratch;

int reduceScatterFloatSum(const float *data, float *shard, int64_t shardCount, int inPlace,
                          char *err, size_t errLen) {
  if (shardCount <= 0)
    return 0;
  // ReduceScatterHalvingDoubling counts the bucket's elements and bytes in
  // ints.
  constexpr int64_t kMaxCount = INT_MAX / int64_t(sizeof(float));
  if (shardCount > kMaxCount / config.size) {
    std::snprintf(err, errLen,
                  "gloo reduce-scatter: a bucket of %lld floats per rank (%d ranks) is too large "
                  "for gloo (at most %lld floats in all); use smaller buckets",
                  static_cast<long long>(shardCount), config.size,
                  static_cast<long long>(kMaxCount));
    return 1;
  }
  const int64_t count = shardCount * config.size;
  return guarded(err, errLen, "gloo reduce-scatter", [&] {
    float *buf = shard - int64_t(config.rank) * shardCount; // in place: data
    if (!inPlace) {
      reduceScatterScratch.assign(data, data + count);
      buf = reduceScatterScratch.data();
    }
    gloo::ReduceScatterHalvingDoubling<float> algorithm(
        context, std::vector<float *>{buf}, int(count),
        std::vector<int>(size_t(config.size), int(shardCount)));
    algorithm.run();
    // This rank's part of the sum is now buf[0 .. shardCount).
    if (shard != buf)
      std::memmove(shard, buf, size_t(shardCount) * sizeof(float));
  });
}

int allgatherFloat(float *data, int64_t shardCount, char *err, size_t errLen) {
  if (shardCount <= 0)
    return 0;
  return guarded(err, errLen, "gloo allgather", [&] {
    gloo::AllgatherOptions opts(context);
    // No input: in place (this rank's part is already in the output).
    opts.setOutput(data, size_t(shardCount) * size_t(config.size));
    opts.setTag(nextTag++);
    opts.setTimeout(timeoutMs());
    gloo::allgather(opts);
  });
}

int broadcast(void *data, int64_t bytes, int root, char *err, size_t errLen) {
  if (bytes <= 0)
    return 0;
  return guarded(err, errLen, "gloo broadcast", [&] {
    gloo::BroadcastOptions opts(context);
    opts.setOutput(static_cast<char *>(data), size_t(bytes));
    opts.setRoot(root);
    opts.setTag(nextTag++);
    opts.setTimeout(timeoutMs());
    gloo::broadcast(opts);
  });
}

int allgather(const void *send, void *recv, int64_t bytesPerRank, char *err, size_t errLen) {
  if (bytesPerRank <= 0)
    return 0;
  return guarded(err, errLen, "gloo allgather", [&] {
    char *out = static_cast<char *>(recv);
    gloo::AllgatherOptions opts(context);
    // Without an input gloo gathers in place (this rank's part already in out).
    if (send != out + bytesPerRank * config.rank)
      opts.setInput(const_cast<char *>(static_cast<const char *>(send)), size_t(bytesPerRank));
    opts.setOutput(out, size_t(bytesPerRank) * size_t(config.size));
    opts.setTag(nextTag++);
    opts.setTimeout(timeoutMs());
    gloo::allgather(opts);
  });
}

int barrier(char *err, size_t errLen) {
  return guarded(err, errLen, "gloo barrier", [&] {
    gloo::BarrierOptions opts(context);
    opts.setTag(nextTag++);
    opts.setTimeout(timeoutMs());
    gloo::barrier(opts);
  });
}

int finalize(char *err, size_t errLen) {
  return guarded(err, errLen, "gloo shutdown", [&] {
    context.reset();
    device.reset();
  });
}

const DtcrtMpiApi kApi = {DTCRT_MPI_PLUGIN_ABI,
                          "gloo",
                          setRendezvous,
                          init,
                          allreduceFloatSum,
                          reduceScatterFloatSum,
                          allgatherFloat,
                          allreduceDoubleSum,
                          broadcast,
                          allgather,
                          barrier,
                          finalize};

} // namespace

extern "C" __attribute__((visibility("default"))) const DtcrtMpiApi *dtcrt_gloo_plugin(void) {
  return &kApi;
}
