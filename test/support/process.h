// Runs the real seqtrans binary in tests: arguments in, exit code and both output streams out.
#pragma once

#include <string>
#include <vector>

namespace seqtrans::testing {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal number when killed by a signal
  std::string out;
  std::string err;
};

// Runs `arguments` (argv[0] is the program path) with `input` on stdin; waits at most `timeout_seconds`
// (then kills it and reports exit code -2, so a hang fails the test instead of stalling CI).
ProcessResult run_process(const std::vector<std::string>& arguments, const std::string& input = "",
                          double timeout_seconds = 120);

// The hidden temporary file that `seqtrans translate -o output`, run as process `pid`, writes until done.
std::string partial_output_path(const std::string& output, int pid);

// Waits until `path` exists or process `pid` exits, for at most `timeout_seconds`. Returns whether the
// process exited (its wait status then in `status`), so a caller knows whether there is a process to signal.
bool wait_for_path_or_exit(const std::string& path, int pid, double timeout_seconds, int& status);

// Path of the seqtrans binary under test.
std::string seqtrans_binary();

// Number of '\n'-terminated lines.
size_t count_lines(const std::string& text);

std::vector<std::string> split_lines(const std::string& text);

}  // namespace seqtrans::testing
