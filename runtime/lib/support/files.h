//===- files.h - Files train writes and reads, safely ---------------------===//
//
// Every file train writes (--save, --checkpoint, --metrics, --trace, the
// --output of --predict and --sample, --calibrate's file, the decoded-data
// cache) goes through AtomicFile, which first looks at what is at PATH:
// - nothing, or a regular file: the data go to a new temporary file in the
//   file's directory, named PATH.tmp.XXXXXX and created exclusively by
//   mkostemp (O_CREAT | O_EXCL: it never opens a file or follows a symlink
//   that is already there); commit() flushes it to disk, renames it over
//   PATH and syncs the directory. Destroyed uncommitted (an error), it
//   removes its temporary file and leaves PATH untouched.
// - a symbolic link to a regular file: the file it names is replaced that way
//   (in its own directory); the link stays, as with cp or a shell's
//   redirection. A link to nothing, or one owned by another user (but root),
//   who could have planted it, is refused.
// - this process's standard output or error (/dev/stdout, /proc/self/fd/1,
//   or the file or pipe they are redirected to): written through that
//   stream, after what was printed before.
// - a character device (/dev/null, a terminal) or a FIFO: opened and written
//   in place, never renamed over or removed (a FIFO's open waits for a
//   reader, as a shell's redirection does).
// - a directory, a block device or a socket: refused.
// - one of the run's inputs (addRunInput: --init, --resume, --predict's
//   input, the data files; the same device and inode, whatever the path):
//   refused, so that a result never replaces what the run reads.
// Errors throw Error("cannot write <what> 'PATH': <why>").
//
// checkWritable(PATH) makes the same decision before a run starts (and, for
// a file to replace, creates and removes such a temporary file), so that a
// missing or read-only directory, a refused target or an output that is an
// input is reported before any work rather than after it.
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
  // what was there), so that both names hold it. A target written in place
  // (a device, a FIFO, standard output) is only closed; alsoLinkAs is not made.
  void commit(const std::string &alsoLinkAs = std::string());

  const std::string &target() const { return target_; }
  // Written in place (a device, a FIFO, standard output), not renamed.
  bool inPlace() const { return temp_.empty(); }

private:
  [[noreturn]] void fail(int err) const;

  std::string target_, what_, temp_;
  std::string file_; // the file renamed over: target_, or what its symlink names
  int fd_ = -1;
  bool sync_ = true;
  bool committed_ = false;
};

// Throws Error("cannot write <what> 'PATH': ...") unless AtomicFile would
// write PATH (above): a file can be created in its directory, or it is a
// device or FIFO this process may write, and it is none of the run's inputs.
// option ("--output"), when given, names the output in the refusal of an
// input and lets an input registered as replaceable by it pass.
void checkWritable(const std::string &path, const std::string &what,
                   const std::string &option = std::string());

// The run's inputs, which no output may replace: option ("--init") and the
// path as given. A path that is not a regular file now is not recorded
// (reading it will say what is wrong). replaceableBy ("--checkpoint"): the
// output option that may replace it (a --resume file is read whole before
// its run writes the next checkpoint over it).
void addRunInput(const std::string &option, const std::string &path,
                 const std::string &replaceableBy = std::string());
// Forgets the inputs of option ("" : all of them).
void forgetRunInputs(const std::string &option = std::string());

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
