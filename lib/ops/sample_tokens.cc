#include <cmath>
#include <cstring>

#include "core/profiler.h"
#include "core/sampling_math.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

Tensor sampling_rows_tensor(const std::vector<SamplingRow>& rows) {
  for (const SamplingRow& row : rows) {
    SEQTRANS_CHECK(row.temperature > 0.0f && std::isfinite(row.temperature),
                   "sample_tokens: temperature must be > 0, got {}", row.temperature);
    SEQTRANS_CHECK(row.top_k >= 0, "sample_tokens: top_k must be >= 0, got {}", row.top_k);
    SEQTRANS_CHECK(row.top_p > 0.0f && row.top_p <= 1.0f, "sample_tokens: top_p must be in (0, 1], got {}", row.top_p);
    SEQTRANS_CHECK(row.min_p >= 0.0f && row.min_p <= 1.0f, "sample_tokens: min_p must be in [0, 1], got {}",
                   row.min_p);
  }
  std::vector<int32_t> words(rows.size() * kSamplingRowWords);
  if (!rows.empty()) std::memcpy(words.data(), rows.data(), rows.size() * sizeof(SamplingRow));
  return Tensor::from_ints({static_cast<int64_t>(rows.size()), kSamplingRowWords}, words);
}

void sample_tokens(const Tensor& logits, const Tensor& rows, const SampleOptions& options, Tensor& ids,
                   Tensor& log_probs) {
  const char* op = "sample_tokens";
  check_rank(op, "logits", logits, 2);
  check_dtype(op, "logits", logits, DataType::F32);
  const int64_t count = logits.dim(0), vocab = logits.dim(1);
  SEQTRANS_CHECK(vocab >= 1 && vocab <= kMaxSamplingVocab, "{}: vocabulary {} must be in [1, {}]", op, vocab,
                 kMaxSamplingVocab);
  check_rank(op, "rows", rows, 2);
  check_dtype(op, "rows", rows, DataType::I32);
  check_extent(op, "rows", rows, 0, count);
  check_extent(op, "rows", rows, 1, kSamplingRowWords);
  check_same_device(op, logits, rows);
  if (options.bias) {
    check_rank(op, "bias", *options.bias, 1);
    check_dtype(op, "bias", *options.bias, DataType::F32);
    check_extent(op, "bias", *options.bias, 0, vocab);
    check_same_device(op, logits, *options.bias);
  }
  if (options.suppressed_ids) {
    check_rank(op, "suppressed_ids", *options.suppressed_ids, 1);
    check_dtype(op, "suppressed_ids", *options.suppressed_ids, DataType::I32);
    check_same_device(op, logits, *options.suppressed_ids);
    if (logits.device() == Device::CPU)
      for (int32_t id : options.suppressed_ids->to_int_vector())
        SEQTRANS_CHECK(id >= 0 && id < vocab, "{}: suppressed id {} outside the vocabulary of {}", op, id, vocab);
  }
  place_output(ids, {count}, DataType::I32, logits.device());
  place_output(log_probs, {count}, DataType::F32, logits.device());
  const ProfileScope profile("output layer");
  switch (logits.device()) {
    case Device::CPU: cpu::sample_tokens(logits, rows, options, ids, log_probs); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(sample_tokens, logits, rows, options, ids, log_probs); break;
  }
}

}  // namespace seqtrans::ops
