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

// Path of the seqtrans binary under test.
std::string seqtrans_binary();

// Number of '\n'-terminated lines.
size_t count_lines(const std::string& text);

std::vector<std::string> split_lines(const std::string& text);

}  // namespace seqtrans::testing
