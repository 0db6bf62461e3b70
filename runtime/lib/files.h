//===- files.h - Files train writes and reads, safely ---------------------===//
//
// Every file train writes (--save, --checkpoint, --metrics, --trace) goes
// through AtomicFile: the data goes to a new temporary file in the target's
// directory, named PATH.tmp.XXXXXX and created exclusively by mkostemp
// (O_CREAT | O_EXCL: it never opens a file or follows a symlink that is
// already there); commit() flushes it to disk, renames it over PATH (which
// replaces a symlink at PATH rather than writing through it) and syncs the
// directory. Destroyed uncommitted (an error), it removes its temporary file
// and leaves PATH untouched. Errors throw
// Error("cannot write <what> 'PATH': <strerror>").
//
// checkWritable(PATH) is the same test made before a run starts: it creates
// and removes such a temporary file, so that a missing or read-only
// directory is reported before training rather than after it.
//
// openForReading(PATH) opens an input (data set, checkpoint) and refuses
// anything but a regular file: a FIFO would block, /dev/zero never end.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <string>

namespace dtc::rt {

class AtomicFile {
public:
  // Durable: commit() syncs the data and the directory (outputs a user keeps).
  // Unsynced: only the rename, for files that can be rebuilt and are checked
  // when read (the decoded-data cache): a crash may lose them, never tear them.
  enum class Sync { Durable, Unsynced };
  AtomicFile(std::string target, std::string what, Sync sync = Sync::Durable);
  ~AtomicFile();
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;

  void write(const void *data, size_t n);
  void write(const std::string &s) { write(s.data(), s.size()); }

  // fsync, close, rename over the target, fsync the directory. With
  // alsoLinkAs, the finished file is first hard-linked there too (replacing
  // what was there), so that both names hold it.
  void commit(const std::string &alsoLinkAs = std::string());

  const std::string &target() const { return target_; }

private:
  [[noreturn]] void fail(int err) const;

  std::string target_, what_, temp_;
  int fd_ = -1;
  bool sync_ = true;
  bool committed_ = false;
};

// Throws Error("cannot write <what> 'PATH': ...") unless a file can be
// created in PATH's directory and PATH is not a directory.
void checkWritable(const std::string &path, const std::string &what);

// The directory part of path, "." when it has none.
std::string directoryOf(const std::string &path);

// A read-only descriptor of the regular file at path (close it), opened
// without blocking on a FIFO; throws Error("cannot open <what> 'PATH': ...")
// or Error("<what> 'PATH' is not a regular file ...").
int openForReading(const std::string &path, const std::string &what);

// The whole of the regular file at path (openForReading's checks), sized
// from fstat; errors as openForReading's, or "cannot read <what> 'PATH': ...".
std::string readWholeFile(const std::string &path, const std::string &what);

} // namespace dtc::rt
