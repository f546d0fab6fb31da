#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

void penalize_repetitions(Tensor& logits, const Tensor& history, const Tensor& lengths,
                          const RepetitionOptions& options) {
  const char* op = "penalize_repetitions";
  check_rank(op, "logits", logits, 2);
  check_dtype(op, "logits", logits, DataType::F32);
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  check_rank(op, "history", history, 2);
  check_dtype(op, "history", history, DataType::I32);
  check_extent(op, "history", history, 0, rows);
  check_rank(op, "lengths", lengths, 1);
  check_dtype(op, "lengths", lengths, DataType::I32);
  check_extent(op, "lengths", lengths, 0, rows);
  check_same_device(op, logits, history);
  check_same_device(op, logits, lengths);
  SEQTRANS_CHECK(options.penalty > 0.0f, "{}: the penalty must be > 0, got {}", op, options.penalty);
  SEQTRANS_CHECK(options.no_repeat_ngram >= 0, "{}: the n-gram size must be >= 0, got {}", op,
                 options.no_repeat_ngram);
  if (options.bias) {
    check_rank(op, "bias", *options.bias, 1);
    check_dtype(op, "bias", *options.bias, DataType::F32);
    check_extent(op, "bias", *options.bias, 0, vocab);
    check_same_device(op, logits, *options.bias);
  }
  const ProfileScope profile("output layer");
  switch (logits.device()) {
    case Device::CPU: cpu::penalize_repetitions(logits, history, lengths, options); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(penalize_repetitions, logits, history, lengths, options); break;
  }
}

}  // namespace seqtrans::ops
