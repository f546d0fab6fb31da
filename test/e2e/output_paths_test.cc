// -o and --output-dir on the real binary: whatever the path names (FIFO, symlink, device, hard-linked or
// protected file, missing directory) is written as the user meant and never swapped for a new file.
// Uses the bundled model on the CPU with greedy search: a few short lines take well under a second.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <future>
#include <iterator>
#include <thread>

#include "catch.h"
#include "support/model_builder.h"
#include "support/process.h"

using namespace seqtrans::testing;

namespace {

const std::string kThreeLines = "A man is riding a bike.\nTwo dogs are playing in the snow.\nYes.\n";

std::vector<std::string> bundled_model_arguments() {
  return {seqtrans_binary(), "translate", "-m", std::string(SEQTRANS_SOURCE_DIR) + "/models/opus-demo-en-de.seqtrans",
          "--device", "cpu", "--quiet", "--beam-size", "1"};
}

ProcessResult translate_to(const std::vector<std::string>& output_flags, const std::string& input = kThreeLines) {
  std::vector<std::string> arguments = bundled_model_arguments();
  arguments.insert(arguments.end(), output_flags.begin(), output_flags.end());
  return run_process(arguments, input, /*timeout_seconds=*/60);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_text(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

// lstat: the kind of the name itself (a link stays a link), 0 when nothing is there.
mode_t kind_of(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0 ? (info.st_mode & S_IFMT) : 0;
}

void check_one_line_error(const ProcessResult& result) {
  CHECK(result.exit_code > 0);
  CHECK(count_lines(result.err) == 1);
  CHECK(result.err.rfind("seqtrans: error:", 0) == 0);
}

// Everything written into a FIFO while `writer` runs. The FIFO is opened without blocking before the
// writer starts, so the writer never waits for a reader, and a writer that replaces the FIFO instead of
// writing into it leaves this with nothing rather than hanging the test.
std::string drain_fifo_while(const std::string& fifo, std::future<ProcessResult>& writer) {
  const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(fd >= 0);
  std::string received;
  char buffer[4096];
  for (bool writer_done = false;;) {
    pollfd readable{fd, POLLIN, 0};
    ::poll(&readable, 1, 50);
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      received.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (writer_done) break;  // one last read after the writer ended found nothing more
    writer_done = writer.wait_for(std::chrono::milliseconds(n == 0 ? 20 : 0)) == std::future_status::ready;
  }
  ::close(fd);
  return received;
}

}  // namespace

TEST_CASE("-o a FIFO: the reader gets every line and the FIFO stays a FIFO", "[e2e][output]") {
  const std::string fifo = temp_path("out.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::future<ProcessResult> writer = std::async(std::launch::async, [&] { return translate_to({"-o", fifo}); });
  // Opened before the writer is likely to get there; a FIFO open for reading lets the writer's open return.
  const std::string received = drain_fifo_while(fifo, writer);
  const ProcessResult result = writer.get();
  CHECK(result.exit_code == 0);
  CHECK(count_lines(received) == 3);
  CHECK(kind_of(fifo) == S_IFIFO);
  ::unlink(fifo.c_str());
}

TEST_CASE("-o a symbolic link: its target gets the translation, the link stays a link", "[e2e][output]") {
  const std::string target = temp_path("target.de"), link = temp_path("link.de");
  write_text(target, "previous\n");
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  REQUIRE(translate_to({"-o", link}).exit_code == 0);
  CHECK(kind_of(link) == S_IFLNK);
  char pointed[4096] = {};
  REQUIRE(::readlink(link.c_str(), pointed, sizeof(pointed) - 1) > 0);
  CHECK(std::string(pointed) == target);
  const std::string translated = read_file(target);
  CHECK(count_lines(translated) == 3);
  CHECK(translated.find("previous") == std::string::npos);
}

TEST_CASE("-o an existing file keeps its mode", "[e2e][output]") {
  const std::string path = temp_path("private.de");
  write_text(path, "previous\n");
  REQUIRE(::chmod(path.c_str(), 0640) == 0);
  REQUIRE(translate_to({"-o", path}).exit_code == 0);
  struct stat info {};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  CHECK((info.st_mode & 07777) == 0640);
  CHECK(count_lines(read_file(path)) == 3);
}

TEST_CASE("-o a file with several hard links is refused and left as it was", "[e2e][output]") {
  const std::string path = temp_path("linked.de"), other_name = temp_path("linked_too.de");
  write_text(path, "previous\n");
  REQUIRE(::link(path.c_str(), other_name.c_str()) == 0);
  check_one_line_error(translate_to({"-o", path}));
  CHECK(read_file(path) == "previous\n");
  CHECK(read_file(other_name) == "previous\n");
}

TEST_CASE("-o /dev/full fails with one line and leaves the device in place", "[e2e][output]") {
  struct stat before {};
  if (::stat("/dev/full", &before) != 0 || !S_ISCHR(before.st_mode)) return;  // no /dev/full here
  const ProcessResult result = translate_to({"-o", "/dev/full"});
  struct stat after {};
  const bool still_device = ::stat("/dev/full", &after) == 0 && S_ISCHR(after.st_mode) && after.st_rdev == before.st_rdev;
  if (!still_device) {  // a broken build must not leave the machine without /dev/full
    ::unlink("/dev/full");
    ::mknod("/dev/full", S_IFCHR | (before.st_mode & 07777), before.st_rdev);
  }
  CHECK(still_device);
  check_one_line_error(result);
  CHECK(result.err.find("No space left on device") != std::string::npos);
}

TEST_CASE("SIGINT during a run leaves the previous contents of a regular target untouched", "[e2e][output]") {
  std::string many_lines;
  for (int i = 0; i < 100; ++i) many_lines += kThreeLines + "The quick brown fox jumps over the lazy dog.\n";
  const std::string input = temp_path("many.en"), output = temp_path("kept.de");
  write_text(input, many_lines);
  write_text(output, "previous\n");
  std::vector<std::string> arguments = bundled_model_arguments();
  for (const std::string& flag : {std::string("-i"), input, std::string("-o"), output}) arguments.push_back(flag);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::vector<char*> argv;
    for (std::string& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  // The temporary file appears when the model has loaded and translation begins: interrupt then.
  const std::string partial = partial_output_path(output, pid);
  int status = 0;
  const bool exited = wait_for_path_or_exit(partial, pid, 30, status);
  const bool started = kind_of(partial) == S_IFREG;
  if (!exited) {
    ::kill(pid, SIGINT);
    ::waitpid(pid, &status, 0);
  }
  CHECK(started);
  CHECK(WIFSIGNALED(status));
  CHECK(read_file(output) == "previous\n");
  CHECK(kind_of(partial) == 0);
}

TEST_CASE("--output-dir is created with its parents; clashing input names are refused first", "[e2e][output]") {
  const std::string a = temp_path("a.en"), b = temp_path("b.en");
  write_text(a, "Hello.\nA dog.\n");
  write_text(b, "Yes.\n");
  const std::string directory = temp_path("made") + "/one/two";
  REQUIRE(translate_to({"-i", a, b, "--output-dir", directory}).exit_code == 0);
  CHECK(count_lines(read_file(directory + "/" + a.substr(a.rfind('/') + 1))) == 2);
  CHECK(count_lines(read_file(directory + "/" + b.substr(b.rfind('/') + 1))) == 1);

  // Same base name from another directory: refused before the directory or any file is made.
  const std::string elsewhere = temp_path("elsewhere");
  REQUIRE(::mkdir(elsewhere.c_str(), 0755) == 0);
  const std::string same_name = elsewhere + "/" + a.substr(a.rfind('/') + 1);
  write_text(same_name, "Yes.\n");
  const std::string refused_directory = temp_path("not_made");
  check_one_line_error(translate_to({"-i", a, same_name, "--output-dir", refused_directory}));
  CHECK(kind_of(refused_directory) == 0);
}
