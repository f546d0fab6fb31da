// A one-line progress bar on stderr for file input: lines done / total, lines/s, ETA.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace seqtrans::app {

class ProgressBar {
 public:
  // Draws only when `enabled` (stderr is a terminal and the user did not ask for --quiet).
  ProgressBar(bool enabled, size_t total_lines, std::string label);
  void advance(size_t lines);
  void finish();

 private:
  void draw(bool final_draw);

  bool enabled_;
  size_t total_;
  size_t done_ = 0;
  std::string label_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

// Lines in a file (counted once up front so the bar can show a total); 0 when unreadable.
size_t count_lines(const std::string& path);

}  // namespace seqtrans::app
