//===- rendezvous.h - A few bytes from rank 0 to every rank over TCP -----===//
//
// Ranks started by torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
// without an MPI launcher meet here once, so that rank 0 can hand its NCCL
// unique id to the others; NCCL then does all the communication. Rank 0
// listens on the port, accepts one connection from each other rank (each
// says "DTCRDZV1", its rank and the world size), and answers each with the
// bytes. Every step has a deadline: the whole exchange must finish within
// `timeoutSeconds` (connecting ranks retry until rank 0 listens).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <string>

namespace dtc::rt {

// Sends data[0..bytes) from rank 0 to ranks 1..worldSize-1 (bytes <= 4096);
// throws Error on a timeout, a refused port or a peer with another world size.
void rendezvousBroadcast(int rank, int worldSize, const std::string &host, int port,
                         double timeoutSeconds, void *data, size_t bytes);

} // namespace dtc::rt
