#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

void log_softmax_topk(const Tensor& logits, const TopkOptions& options, Tensor& values, Tensor& ids) {
  check_rank("log_softmax_topk", "logits", logits, 2);
  check_float("log_softmax_topk", "logits", logits);
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  SEQTRANS_CHECK(options.k >= 1 && options.k <= vocab, "log_softmax_topk: k = {} must be in [1, vocabulary {}]",
                 options.k, vocab);
  SEQTRANS_CHECK(logits.device() == Device::CPU || options.k <= kMaxDeviceTopk,
                 "log_softmax_topk: k = {} exceeds the GPU limit of {} (beam size at most {})", options.k,
                 kMaxDeviceTopk, kMaxDeviceTopk / 2);
  if (options.bias) {
    check_rank("log_softmax_topk", "bias", *options.bias, 1);
    check_extent("log_softmax_topk", "bias", *options.bias, 0, vocab);
    check_same_device("log_softmax_topk", logits, *options.bias);
  }
  if (options.suppressed_ids) {
    check_rank("log_softmax_topk", "suppressed_ids", *options.suppressed_ids, 1);
    check_dtype("log_softmax_topk", "suppressed_ids", *options.suppressed_ids, DataType::I32);
    check_same_device("log_softmax_topk", logits, *options.suppressed_ids);
    if (logits.device() == Device::CPU)
      for (int32_t id : options.suppressed_ids->to_int_vector())
        SEQTRANS_CHECK(id >= 0 && id < vocab, "log_softmax_topk: suppressed id {} outside the vocabulary of {}", id,
                       vocab);
  }
  place_output(values, {rows, options.k}, DataType::F32, logits.device());
  place_output(ids, {rows, options.k}, DataType::I32, logits.device());
  const ProfileScope profile("output layer");
  switch (logits.device()) {
    case Device::CPU: cpu::log_softmax_topk(logits, options, values, ids); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(log_softmax_topk, logits, options, values, ids); break;
  }
}

Tensor suppression_bitmap(const Tensor& ids, int64_t vocab) {
  check_rank("suppression_bitmap", "ids", ids, 1);
  check_dtype("suppression_bitmap", "ids", ids, DataType::I32);
  SEQTRANS_CHECK(vocab >= 1, "suppression_bitmap: vocabulary of {}", vocab);
  if (ids.device() == Device::CPU) return Tensor();
  Tensor bitmap({(vocab + 31) / 32}, DataType::I32, ids.device());
  SEQTRANS_ON_CUDA(write_suppression_bitmap, ids, bitmap);
  return bitmap;
}

}  // namespace seqtrans::ops
