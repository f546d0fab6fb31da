// What every fuzz target asserts: a broken property ends the run with a named report (libFuzzer then
// saves the input as crash-*), and library errors are one line.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace seqtrans::fuzz {

// Aborts with `what` when `condition` is false: libFuzzer counts an abort as a finding.
inline void require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz property violated: %s\n", what);
  std::abort();
}

// The CLI prints an Error's message as its one stderr line, so a message must be non-empty and one line.
inline void require_one_line(const std::string& message) {
  require(!message.empty(), "an error message is empty");
  if (message.find('\n') != std::string::npos) std::fprintf(stderr, "message: %s\n", message.c_str());
  require(message.find('\n') == std::string::npos, "an error message spans several lines");
}

}  // namespace seqtrans::fuzz
