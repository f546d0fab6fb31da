#include "batching/output_order.h"

#include <algorithm>

#include "core/error.h"

namespace seqtrans {

OutputReorderer::OutputReorderer(size_t window_size)
    : outputs_(window_size), filled_(window_size, false), missing_(window_size) {}

void OutputReorderer::set(size_t position, std::string output) {
  SEQTRANS_CHECK(position < outputs_.size(), "output reorderer: position {} outside a window of {} lines",
                 position, outputs_.size());
  SEQTRANS_CHECK(!filled_[position], "output reorderer: line {} of the window has two outputs", position);
  outputs_[position] = std::move(output);
  filled_[position] = true;
  --missing_;
}

std::vector<std::string> OutputReorderer::take() {
  const auto first_missing = std::find(filled_.begin(), filled_.end(), false);
  SEQTRANS_CHECK(first_missing == filled_.end(), "output reorderer: line {} of the window has no output",
                 first_missing - filled_.begin());
  // Leaves an empty window of the same size behind, ready for reuse.
  std::vector<std::string> taken(outputs_.size());
  taken.swap(outputs_);
  std::fill(filled_.begin(), filled_.end(), false);
  missing_ = filled_.size();
  return taken;
}

}  // namespace seqtrans
