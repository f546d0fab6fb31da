// penalize_repetitions: Hugging Face's repetition penalty and no-repeat-n-gram processors, one block per
// row, in place: the row gets its bias (and, for beam search, is normalized to log-probs), then each
// distinct id of the row's history is penalized by one thread (the one holding its first occurrence),
// then every n-gram start of the history is checked by one thread and the id it would repeat goes to -inf.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

constexpr int kThreads = 256;

struct RepetitionArguments {
  float* logits;           // [rows, vocab]
  const float* bias;       // [vocab] or null
  const int32_t* history;  // [rows, capacity]
  const int32_t* lengths;  // [rows]
  int vocab;
  int capacity;
  float penalty;
  int ngram;
  bool normalize;
};

__device__ bool first_occurrence(const int32_t* ids, int j) {
  for (int earlier = 0; earlier < j; ++earlier)
    if (ids[earlier] == ids[j]) return false;
  return true;
}

__global__ void __launch_bounds__(kThreads) penalize_repetitions_kernel(RepetitionArguments args) {
  start_after_inputs();
  __shared__ float scratch[32];
  const int64_t row_index = blockIdx.x;
  float* row = args.logits + row_index * args.vocab;
  float local_max = -INFINITY;
  for (int i = threadIdx.x; i < args.vocab; i += kThreads) {
    const float z = args.bias != nullptr ? __fadd_rn(row[i], args.bias[i]) : row[i];
    row[i] = z;
    local_max = fmaxf(local_max, z);
  }
  if (args.normalize) {
    const float max = block_max(local_max, scratch);
    if (max != -INFINITY) {
      float local_sum = 0.0f;
      for (int i = threadIdx.x; i < args.vocab; i += kThreads) local_sum += expf(row[i] - max);
      const float log_sum = logf(block_sum(local_sum, scratch));
      for (int i = threadIdx.x; i < args.vocab; i += kThreads) row[i] = (row[i] - max) - log_sum;
    }
  }
  __syncthreads();  // the row is written before single entries are read back

  const int length = min(max(args.lengths[row_index], 0), args.capacity);
  const int32_t* ids = args.history + row_index * args.capacity;
  const auto in_vocabulary = [&](int32_t id) { return id >= 0 && id < args.vocab; };
  if (args.penalty != 1.0f) {
    for (int j = threadIdx.x; j < length; j += kThreads) {
      const int32_t id = ids[j];
      if (!in_vocabulary(id) || !first_occurrence(ids, j)) continue;
      const float value = row[id];
      row[id] = value < 0.0f ? value * args.penalty : value / args.penalty;
    }
  }
  __syncthreads();  // penalties before bans, as HF orders its processors
  const int n = args.ngram;
  if (n > 0 && length + 1 >= n) {
    for (int start = threadIdx.x; start + n <= length; start += kThreads) {
      bool same = true;
      for (int j = 0; j + 1 < n && same; ++j) same = ids[start + j] == ids[length - n + 1 + j];
      if (same && in_vocabulary(ids[start + n - 1])) row[ids[start + n - 1]] = -INFINITY;
    }
  }
}

}  // namespace

void penalize_repetitions(Tensor& logits, const Tensor& history, const Tensor& lengths,
                          const ops::RepetitionOptions& options, cudaStream_t stream) {
  const char* op = "penalize_repetitions";
  check_on_device(op, "logits", logits);
  check_on_device(op, "history", history);
  check_on_device(op, "lengths", lengths);
  const int64_t rows = logits.dim(0);
  SEQTRANS_CHECK(rows <= context().properties.maxGridSize[0], "{}: {} rows exceed the grid limit", op, rows);
  if (options.bias != nullptr) check_on_device(op, "bias", *options.bias);
  if (rows == 0) return;
  RepetitionArguments args;
  args.logits = logits.data<float>();
  args.bias = options.bias != nullptr ? options.bias->data<float>() : nullptr;
  args.history = history.data<int32_t>();
  args.lengths = lengths.data<int32_t>();
  args.vocab = static_cast<int>(logits.dim(1));
  args.capacity = static_cast<int>(history.dim(1));
  args.penalty = options.penalty;
  args.ngram = options.no_repeat_ngram;
  args.normalize = options.normalize;
  launch_kernel(penalize_repetitions_kernel, static_cast<unsigned>(rows), kThreads, 0, stream, args);
}

}  // namespace seqtrans::cuda
