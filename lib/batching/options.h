// Batching settings: how much input is read ahead and how it is cut into mini-batches.
#pragma once

#include <cstddef>

namespace seqtrans {

// The budgets' defaults per device. A GPU keeps 256 sentences in flight: on newstest2014 (H200, beam 4,
// fp16, iteration) 64 / 128 / 256 sentences gave 113k / 160k / 210k target tokens/s and p99 line
// latency 640 / 450 / 344 ms, for 216 / 381 / 710 MiB of GPU tensors. The CPU gains nothing from more
// rows per step and would only hold its first outputs back longer.
inline constexpr size_t kCpuMaxBatchSize = 64, kCpuMaxBatchTokens = 4096;
inline constexpr size_t kGpuMaxBatchSize = 256, kGpuMaxBatchTokens = 16384;

// How lines are read ahead and grouped; the translator passes these to LineReader and the scheduler.
struct BatchingOptions {
  // Padded source tokens per mini-batch: sentences x longest source length (EOS counted). With 4096,
  // sentences of up to 64 tokens (most of them) fill a batch of max_batch_size, while longer ones make
  // smaller batches, so encoder activations and the decoder cache stay bounded.
  size_t max_batch_tokens = kCpuMaxBatchTokens;
  // Sentences per mini-batch. 64 sentences x beam 4 = 256 decoder rows, enough to keep a GPU's matrix
  // units busy at each step, while one slow sentence holds up at most 63 others (on the CPU; a GPU run
  // defaults to kGpuMaxBatchSize, see resolve_settings).
  size_t max_batch_size = kCpuMaxBatchSize;
  // Lines read (and length-sorted) together: 2048 is 32 full batches, enough for sorting to group
  // similar lengths (little padding), small enough to hold in memory and to start output quickly.
  // Interactive input does not wait for it: a window ends early when no more input is ready.
  size_t read_ahead = 2048;
};

// Throws seqtrans::Error naming the first setting that is zero.
void validate(const BatchingOptions& options);

}  // namespace seqtrans
