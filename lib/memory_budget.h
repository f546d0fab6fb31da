// Device (or host) memory against the batch budget: what a run reserves up front, and a budget lowered to what
// the device has (memory pressure is a size, not a failure).
#pragma once

#include <cstddef>
#include <string>

#include "batching/options.h"
#include "core/dtype.h"
#include "format/model_file.h"

namespace seqtrans {

// What a run asks of the device: the weights plus the largest batch's working set.
struct ReservationInputs {
  DataType dtype = DataType::F16;
  BatchingOptions batching;
  int slots_per_sentence = 4;  // decoder rows a sentence takes: its beam, or its samples
  size_t max_input_length = 1024;
};

// Bytes reserved at start (see memory_budget.cc for how each part is sized).
size_t device_reservation(const ModelFile& file, const ReservationInputs& inputs);

// The largest budget (sentences and source tokens lowered by one factor) whose reservation fits in 90% of
// `available_bytes`, and a one-line note saying by how much it was lowered (empty when it already fit).
// Throws when even one sentence does not fit.
struct FittedBudget {
  BatchingOptions batching;
  std::string note;
};
// The memory a budget is fitted to, as messages name it.
struct AvailableMemory {
  size_t bytes = 0;
  bool capped = false;  // bytes is the --max-gpu-memory cap rather than what the device has free
  bool host = false;    // the CPU backend's host memory rather than a GPU's
};
FittedBudget fit_budget_to_memory(const ModelFile& file, const ReservationInputs& inputs,
                                  const AvailableMemory& available);

}  // namespace seqtrans
