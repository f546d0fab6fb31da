#include "output_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "descriptor_stream.h"

namespace seqtrans::app {
namespace {

// ---- Paths ----

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string join_path(const std::string& directory, const std::string& name) {
  return directory.back() == '/' ? directory + name : directory + "/" + name;
}

std::string name_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

[[noreturn]] void fail(const std::string& path, int error) {
  throw Error(fmt::format("cannot write output '{}': {}", path, std::strerror(error)));
}

// Every name on the way from `path` to the file it finally means, one symbolic link at a time.
// Followed by hand rather than with realpath() so that a dangling link still names the file it
// would create.
std::vector<std::string> link_chain(const std::string& path) {
  std::vector<std::string> chain = {path};
  for (int hops = 0; hops < 40; ++hops) {
    char target[PATH_MAX];
    const ssize_t size = ::readlink(chain.back().c_str(), target, sizeof(target));
    if (size < 0 && (errno == EINVAL || errno == ENOENT)) return chain;  // not a link, or nothing there yet
    if (size < 0) fail(path, errno);
    if (static_cast<size_t>(size) == sizeof(target)) fail(path, ENAMETOOLONG);
    const std::string link(target, static_cast<size_t>(size));
    chain.push_back(link[0] == '/' ? link : join_path(directory_of(chain.back()), link));
  }
  fail(path, ELOOP);
}

// /proc and /sys files are kernel interfaces, and /dev/stdout and /dev/fd/N lead through /proc to an
// open descriptor: such names are written, never replaced.
bool on_kernel_file_system(const std::string& path) {
  struct statfs info {};
  if (::statfs(directory_of(path).c_str(), &info) != 0) return false;
  return info.f_type == PROC_SUPER_MAGIC || info.f_type == SYSFS_MAGIC;
}

std::string real_directory(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(directory_of(path).c_str(), resolved) == nullptr) fail(path, errno);
  return resolved;
}

// ---- Temporary files and signals ----

// The temporary file being written, for the signal handler; one output file is open at a time.
char pending_path[PATH_MAX];
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

// A file beside the final one that is removed again unless renamed into place, also when a signal
// ends the program.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string path) : path_(std::move(path)) {
    SEQTRANS_CHECK(path_.size() < sizeof(pending_path), "output path too long: {}", path_);
    install_handlers();
    std::strcpy(pending_path, path_.c_str());  // before creating it, so no signal can leave it behind
  }
  ~TemporaryFile() {
    if (!renamed_) ::unlink(path_.c_str());
    pending_path[0] = '\0';
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;

  // O_EXCL never follows a link someone planted under our name. A leftover of an earlier process that
  // had our pid and was killed is removed (unlink removes a link, not its target) and we try once more.
  int create(mode_t permissions, const std::string& user_path) const {
    for (int attempt = 0; attempt < 2; ++attempt) {
      const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, permissions);
      if (fd >= 0) return fd;
      if (errno != EEXIST || attempt > 0) break;
      ::unlink(path_.c_str());
    }
    fail(user_path, errno);
  }

  void rename_to(const std::string& final_path, const std::string& user_path) {
    if (::rename(path_.c_str(), final_path.c_str()) != 0) fail(user_path, errno);
    renamed_ = true;
  }

 private:
  std::string path_;
  bool renamed_ = false;
};

// ---- The two ways of writing ----

// Replace: a temporary file in the final file's real directory, renamed over it when complete.
class ReplacingOutput : public OutputTarget {
 public:
  explicit ReplacingOutput(const OutputPlan& plan)
      : plan_(plan),
        final_path_(join_path(plan.directory, plan.name)),
        temporary_(join_path(plan.directory, "." + plan.name + ".partial-" + std::to_string(::getpid()))),
        // An existing file's contents stay private (0600) until its own mode is set below.
        file_(temporary_.create(plan.exists ? 0600 : 0666, plan.path), plan.path) {
    if (plan.exists) carry_over_ownership();
  }

  std::ostream& stream() override { return file_.stream(); }

  void commit() override {
    file_.flush();
    // Data on disk before the rename: after a crash the name holds the old or the new contents, whole.
    // EINVAL: a file system without fsync, where there is nothing more to wait for.
    if (::fsync(file_.fd()) != 0 && errno != EINVAL) fail(plan_.path, errno);
    file_.close();
    temporary_.rename_to(final_path_, plan_.path);
    sync_directory();
  }

 private:
  // Owner first: chown may clear set-id bits that the mode then restores. Only root may give a file
  // away, so EPERM leaves the file ours, as any editor's save would.
  void carry_over_ownership() {
    if (::fchown(file_.fd(), plan_.owner, plan_.group) != 0 && errno != EPERM) fail(plan_.path, errno);
    if (::fchmod(file_.fd(), plan_.permissions) != 0) fail(plan_.path, errno);
  }

  // Makes the rename itself durable; the output is complete either way, so failure here is not an error.
  void sync_directory() const {
    const int fd = ::open(plan_.directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
  }

  OutputPlan plan_;
  std::string final_path_;
  TemporaryFile temporary_;
  DescriptorStream file_;
};

int open_in_place(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);  // a FIFO waits here for its reader
  if (fd < 0) fail(path, errno);
  // A regular file reached through /dev/stdout or /dev/fd/N was opened by the shell (`>` truncated it,
  // `>>` means append): appending honours both, where truncating would undo `>>`.
  struct stat info {};
  if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode)) ::fcntl(fd, F_SETFL, O_APPEND);
  return fd;
}

// InPlace: the named file opened and written directly; nothing is created, renamed or removed.
class InPlaceOutput : public OutputTarget {
 public:
  explicit InPlaceOutput(const OutputPlan& plan) : file_(open_in_place(plan.path), plan.path) {}
  std::ostream& stream() override { return file_.stream(); }
  void commit() override { file_.close(); }

 private:
  DescriptorStream file_;
};

}  // namespace

OutputPlan plan_output(const std::string& path) {
  OutputPlan plan;
  plan.path = path;
  struct stat info {};
  plan.exists = ::stat(path.c_str(), &info) == 0;
  if (!plan.exists && errno != ENOENT) fail(path, errno);
  if (plan.exists && S_ISDIR(info.st_mode)) fail(path, EISDIR);
  if (plan.exists && !S_ISREG(info.st_mode)) {
    plan.mode = OutputMode::InPlace;
    return plan;
  }
  const std::vector<std::string> chain = link_chain(path);
  for (const std::string& hop : chain) {
    if (on_kernel_file_system(hop)) {
      plan.mode = OutputMode::InPlace;
      return plan;
    }
  }
  SEQTRANS_CHECK(!plan.exists || info.st_nlink == 1,
                 "output file '{}' has {} hard links: refusing to replace it (that would split it from its other "
                 "names); remove it or write elsewhere",
                 path, info.st_nlink);
  plan.name = name_of(chain.back());
  if (plan.name.empty() || plan.name == "." || plan.name == "..") fail(path, EISDIR);
  plan.directory = real_directory(chain.back());
  plan.permissions = info.st_mode & 07777;
  plan.owner = info.st_uid;
  plan.group = info.st_gid;
  return plan;
}

std::unique_ptr<OutputTarget> open_output(const std::string& path) {
  const OutputPlan plan = plan_output(path);
  if (plan.mode == OutputMode::InPlace) return std::make_unique<InPlaceOutput>(plan);
  return std::make_unique<ReplacingOutput>(plan);
}

}  // namespace seqtrans::app
