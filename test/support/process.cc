#include "support/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "core/error.h"

namespace seqtrans::testing {

std::string partial_output_path(const std::string& output, int pid) {
  const size_t slash = output.rfind('/');
  const std::string directory = slash == std::string::npos ? "" : output.substr(0, slash + 1);
  return directory + "." + output.substr(slash == std::string::npos ? 0 : slash + 1) + ".partial-" +
         std::to_string(pid);
}

bool wait_for_path_or_exit(const std::string& path, int pid, double timeout_seconds, int& status) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  struct stat info {};
  while (::lstat(path.c_str(), &info) != 0 && std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return true;
    ::usleep(5000);
  }
  return false;
}

ProcessResult run_process(const std::vector<std::string>& arguments, const std::string& input,
                          double timeout_seconds) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  SEQTRANS_CHECK(::pipe(in_pipe) == 0 && ::pipe(out_pipe) == 0 && ::pipe(err_pipe) == 0, "pipe failed");
  const pid_t pid = ::fork();
  SEQTRANS_CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    ::dup2(in_pipe[0], STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    std::vector<char*> argv;
    for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
  ::signal(SIGPIPE, SIG_IGN);

  ProcessResult result;
  size_t written = 0;
  if (input.empty()) ::close(in_pipe[1]);
  bool input_open = !input.empty(), out_open = true, err_open = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  char buffer[65536];
  while (out_open || err_open) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      result.exit_code = -2;
      return result;
    }
    pollfd fds[3];
    int count = 0;
    if (out_open) fds[count++] = {out_pipe[0], POLLIN, 0};
    if (err_open) fds[count++] = {err_pipe[0], POLLIN, 0};
    if (input_open) fds[count++] = {in_pipe[1], POLLOUT, 0};
    ::poll(fds, count, 100);
    for (int i = 0; i < count; ++i) {
      if (!fds[i].revents) continue;
      if (fds[i].fd == in_pipe[1]) {
        const ssize_t n = ::write(in_pipe[1], input.data() + written, input.size() - written);
        if (n > 0) written += static_cast<size_t>(n);
        if (n < 0 && errno != EAGAIN) written = input.size();
        if (written == input.size()) {
          ::close(in_pipe[1]);
          input_open = false;
        }
        continue;
      }
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      std::string& sink = fds[i].fd == out_pipe[0] ? result.out : result.err;
      if (n > 0) {
        sink.append(buffer, static_cast<size_t>(n));
      } else {
        (fds[i].fd == out_pipe[0] ? out_open : err_open) = false;
        ::close(fds[i].fd);
      }
    }
  }
  if (input_open) ::close(in_pipe[1]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string seqtrans_binary() { return std::string(SEQTRANS_BINARY_DIR) + "/seqtrans"; }

size_t count_lines(const std::string& text) {
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') {
      lines.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

}  // namespace seqtrans::testing
