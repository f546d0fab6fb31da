#include "output_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace seqtrans::app {
namespace {

// The temporary file being written, for the signal handler; one output file is open at a time.
char pending_path[4096];
std::atomic<bool> handlers_installed{false};

void remove_pending_and_reraise(int signal_number) {
  if (pending_path[0] != '\0') ::unlink(pending_path);  // async-signal-safe
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

void install_handlers() {
  if (handlers_installed.exchange(true)) return;
  std::signal(SIGINT, remove_pending_and_reraise);
  std::signal(SIGTERM, remove_pending_and_reraise);
  std::signal(SIGHUP, remove_pending_and_reraise);
}

std::string temporary_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string directory = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return directory + "." + name + ".partial-" + std::to_string(::getpid());
}

}  // namespace

AtomicOutputFile::AtomicOutputFile(const std::string& path) : path_(path), temporary_path_(temporary_name(path)) {
  SEQTRANS_CHECK(temporary_path_.size() < sizeof(pending_path), "output path too long: {}", path);
  install_handlers();
  stream_.open(temporary_path_, std::ios::binary | std::ios::trunc);
  SEQTRANS_CHECK(stream_.is_open(), "cannot write output file '{}': {}", path, std::strerror(errno));
  std::strcpy(pending_path, temporary_path_.c_str());
}

AtomicOutputFile::~AtomicOutputFile() {
  if (!committed_) {
    stream_.close();
    ::unlink(temporary_path_.c_str());
  }
  pending_path[0] = '\0';
}

void AtomicOutputFile::commit() {
  stream_.flush();
  SEQTRANS_CHECK(stream_.good(), "error writing output file '{}' (disk full?)", path_);
  stream_.close();
  SEQTRANS_CHECK(std::rename(temporary_path_.c_str(), path_.c_str()) == 0, "cannot move output into '{}': {}", path_,
                 std::strerror(errno));
  committed_ = true;
  pending_path[0] = '\0';
}

}  // namespace seqtrans::app
