//===- data_cache.h - Decoded data sets cached next to their sources ------===//
//
// Decoding Fashion-MNIST (47 MB of pixels inflated from gzip, then scaled to
// floats in 220 MB of fresh memory the kernel must zero) took 0.13 s of a
// 0.17 s start, on every rank, every run. The cache keeps the decoded floats
// and labels in one file per data set, which later runs map read-only: no
// inflate, no conversion, no zeroed memory, and the ranks of a node share the
// same page-cache pages instead of holding a copy each. (Hugging Face
// `datasets` memory-maps its Arrow cache the same way.) A file truncated
// while mapped faults at the next access (SIGBUS): a handler installed with
// the first mapping names the file and ends the run with an error (exit
// status 1); a fault anywhere else gets the previous handler or the default.
//
// File: <dir>/idx-<hash of the sources' real paths>.dtcdata
//   a text header, NUL-padded to a multiple of 4096 bytes:
//     dtc decoded data cache 1
//     reader idx u8/255 f32 i32 <byte order>
//     images <real path>
//     images-stat size=<bytes> mtime=<s>.<ns> inode=<n>
//     labels <real path>
//     labels-stat ...
//     samples <N> features <F> crc32 <8 hex digits>
//   then the features, float [N, F], and the labels, int32 [N], whose CRC-32
//   is the header's.
// A file is used only when its header matches the sources as they are now
// (path, size, modification time, inode), its size is exact, its CRC-32
// holds and only this user can have written it (the file and its directory
// owned by the effective user, not writable by group or others: the header
// and the CRC are public); anything else is decoded afresh and the file
// replaced. A directory others may write is neither read nor written. Files are
// written whole to a temporary name and renamed (AtomicFile, unsynced: a
// crash can lose the cache, never tear it), by one process at a time (an
// flock on <file>.lock; the others wait and then map what it wrote).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "data/data.h"

#include <string>

namespace dtc::rt {

// Where the cache lives unless --data-cache says: $DTC_CACHE_DIR ("off"
// disables it), else $XDG_CACHE_HOME/dtc, else $HOME/.cache/dtc; "" (off)
// when none of them is set.
std::string defaultDataCacheDir();

// What readIdxCached did, for tests and notes.
enum class CacheOutcome {
  Off,      // no cache directory: decoded
  Hit,      // mapped from the cache
  Stored,   // decoded and written to the cache
  NotStored // decoded; the cache could not be written, or is not trusted (see note)
};

// readIdx through the cache in cacheDir ("" or "off": readIdx itself). Errors
// in the sources are readIdx's, whatever the cache holds; a cache that
// cannot be read or written never fails the load: *note (when given) then
// says what happened, for the user.
Dataset readIdxCached(const std::string &imagesPath, const std::string &labelsPath,
                      const std::string &cacheDir, CacheOutcome *outcome = nullptr,
                      std::string *note = nullptr);

} // namespace dtc::rt
