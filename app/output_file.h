// Output files that appear under their final name only when complete.
#pragma once

#include <fstream>
#include <string>

namespace seqtrans::app {

// Writes to a hidden temporary file beside `path` and renames it over `path` on commit(). If the
// program fails or is interrupted (SIGINT, SIGTERM) first, the temporary file is removed, so an
// interrupted run never leaves a truncated file under the final name.
class AtomicOutputFile {
 public:
  explicit AtomicOutputFile(const std::string& path);
  ~AtomicOutputFile();
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

  std::ostream& stream() { return stream_; }
  // Flushes, checks for write errors and renames into place; throws seqtrans::Error on failure.
  void commit();

 private:
  std::string path_;
  std::string temporary_path_;
  std::ofstream stream_;
  bool committed_ = false;
};

}  // namespace seqtrans::app
