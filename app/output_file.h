// Output files (-o, --output-dir, bench reports): what the user named is written, never swapped for
// something else. A regular file is replaced atomically; a device, FIFO or descriptor is written in place.
#pragma once

#include <sys/types.h>

#include <memory>
#include <ostream>
#include <string>

namespace seqtrans::app {

// How an output path is written.
enum class OutputMode {
  Replace,  // regular file, existing or new: temporary file beside it, fsync, rename over it
  InPlace,  // device, FIFO, socket, /dev/stdout, /dev/fd/N, /proc or /sys file: opened and written directly
};

// What an output path names once symbolic links are followed, and so how to write it.
struct OutputPlan {
  std::string path;  // as the user gave it: for messages, and what InPlace opens
  OutputMode mode = OutputMode::Replace;
  // Replace only: the final file's real directory and its name there (the temporary file goes beside it).
  std::string directory;
  std::string name;
  bool exists = false;  // Replace: the final file exists; its mode and owner are carried over
  mode_t permissions = 0;
  uid_t owner = 0;
  gid_t group = 0;
};

// Decides how `path` is written. Throws seqtrans::Error (one line) for a directory, a missing parent
// directory, or a regular file with several hard links: replacing it would split it from its other
// names and writing it in place would not be atomic, so it is refused.
OutputPlan plan_output(const std::string& path);

// An output being written: write to stream(), then commit(). Dropped without commit() (an error, an
// exception), a Replace target's previous contents are untouched; SIGINT, SIGTERM and SIGHUP also
// remove the temporary file.
class OutputTarget {
 public:
  virtual ~OutputTarget() = default;
  virtual std::ostream& stream() = 0;
  // Writes out, checks for write errors and (Replace) renames into place; throws seqtrans::Error.
  virtual void commit() = 0;
};

// Plans `path` afresh (so the decision matches the file as it is now) and opens it.
std::unique_ptr<OutputTarget> open_output(const std::string& path);

}  // namespace seqtrans::app
