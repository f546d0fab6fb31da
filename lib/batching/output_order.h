// OutputReorderer: puts a window's translations, finished batch by batch, back into input order.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace seqtrans {

// Collects one output per line of a window, in whatever order batches finish, and hands them back in
// input order once every line has one. Checks that no line is missed or written twice.
class OutputReorderer {
 public:
  explicit OutputReorderer(size_t window_size);

  // Stores the output of the window's line at `position` (0-based position in the window).
  void set(size_t position, std::string output);
  bool complete() const { return missing_ == 0; }
  // The outputs in input order; throws seqtrans::Error naming the first line without one.
  std::vector<std::string> take();

 private:
  std::vector<std::string> outputs_;  // [window_size]
  std::vector<bool> filled_;          // [window_size]
  size_t missing_;
};

}  // namespace seqtrans
