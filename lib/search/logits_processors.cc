#include "search/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "search/search_common.h"

namespace seqtrans {

namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

void check_id(int32_t id, int64_t vocab, const char* what) {
  SEQTRANS_CHECK(id >= 0 && id < vocab, "{} id {} is outside the vocabulary of {} tokens", what, id, vocab);
}

}  // namespace

void LogSoftmax::apply(ScoreRow row, const RowPosition& /*position*/) const {
  float* values = row.values;
  float max_value = kMinusInfinity;
  for (int64_t i = 0; i < row.vocab; ++i) max_value = std::max(max_value, values[i]);
  // An all -inf row stays all -inf; callers report it as a row without a finite choice.
  if (max_value == kMinusInfinity) return;
  double exp_sum = 0.0;
  for (int64_t i = 0; i < row.vocab; ++i) exp_sum += std::exp(static_cast<double>(values[i] - max_value));
  const float log_sum = static_cast<float>(std::log(exp_sum));
  for (int64_t i = 0; i < row.vocab; ++i) values[i] = (values[i] - max_value) - log_sum;
}

SuppressIds::SuppressIds(std::vector<int32_t> ids) : ids_(std::move(ids)) {}

void SuppressIds::apply(ScoreRow row, const RowPosition& /*position*/) const {
  for (int32_t id : ids_) {
    check_id(id, row.vocab, "suppressed");
    row.values[id] = kMinusInfinity;
  }
}

ForceEosAtMaxLength::ForceEosAtMaxLength(int32_t eos_id) : eos_id_(eos_id) {}

void ForceEosAtMaxLength::apply(ScoreRow row, const RowPosition& position) const {
  if (position.generated != position.max_generated - 1) return;
  check_id(eos_id_, row.vocab, "EOS");
  std::fill(row.values, row.values + row.vocab, kMinusInfinity);
  row.values[eos_id_] = 0.0f;
}

Temperature::Temperature(float temperature) : temperature_(temperature) {
  SEQTRANS_CHECK(temperature > 0.0f, "temperature must be > 0, got {}", temperature);
}

void Temperature::apply(ScoreRow row, const RowPosition& /*position*/) const {
  for (int64_t i = 0; i < row.vocab; ++i) row.values[i] /= temperature_;
}

TopKFilter::TopKFilter(int k) : k_(k) { SEQTRANS_CHECK(k >= 0, "sampling_topk must be >= 0, got {}", k); }

void TopKFilter::apply(ScoreRow row, const RowPosition& /*position*/) const {
  if (k_ == 0 || k_ >= row.vocab) return;
  std::vector<float> sorted(row.values, row.values + row.vocab);  // [vocab]
  std::nth_element(sorted.begin(), sorted.begin() + (k_ - 1), sorted.end(), std::greater<float>());
  const float kth_value = sorted[k_ - 1];
  for (int64_t i = 0; i < row.vocab; ++i) {
    if (row.values[i] < kth_value) row.values[i] = kMinusInfinity;
  }
}

TopPFilter::TopPFilter(float p) : p_(p) {
  SEQTRANS_CHECK(p > 0.0f && p <= 1.0f, "sampling_topp must be in (0, 1], got {}", p);
}

void TopPFilter::apply(ScoreRow row, const RowPosition& /*position*/) const {
  if (p_ >= 1.0f || row.vocab == 0) return;
  const float* values = row.values;
  // Ascending by score; among equal scores higher ids come first, so the kept tail prefers lower ids.
  std::vector<int64_t> order(static_cast<size_t>(row.vocab));  // [vocab]
  std::iota(order.begin(), order.end(), int64_t{0});
  std::sort(order.begin(), order.end(),
            [values](int64_t a, int64_t b) { return values[a] < values[b] || (values[a] == values[b] && a > b); });
  const float max_value = values[order.back()];
  if (max_value == kMinusInfinity) return;
  double exp_sum = 0.0;
  for (int64_t i = 0; i < row.vocab; ++i) exp_sum += std::exp(static_cast<double>(values[i] - max_value));
  // HF compares the fp32 cumulative sum with (1 - top_p) cast to fp32; torch's CPU cumsum accumulates
  // in double and stores fp32.
  const float threshold = static_cast<float>(1.0 - static_cast<double>(p_));
  double cumulative = 0.0;
  std::vector<int64_t> removed;
  for (size_t rank = 0; rank + 1 < order.size(); ++rank) {
    const int64_t id = order[rank];
    const float probability = static_cast<float>(std::exp(static_cast<double>(values[id] - max_value)) / exp_sum);
    cumulative += probability;
    if (static_cast<float>(cumulative) > threshold) break;
    removed.push_back(id);
  }
  for (int64_t id : removed) row.values[id] = kMinusInfinity;
}

void LogitsProcessorChain::add(std::unique_ptr<LogitsProcessor> processor) {
  processors_.push_back(std::move(processor));
}

void LogitsProcessorChain::apply(ScoreRow row, const RowPosition& position) const {
  for (const auto& processor : processors_) processor->apply(row, position);
}

SuppressEosBeforeMinLength::SuppressEosBeforeMinLength(int32_t eos_id, int min_length)
    : eos_id_(eos_id), min_length_(min_length) {}

void SuppressEosBeforeMinLength::apply(ScoreRow row, const RowPosition& position) const {
  if (position.generated < min_length_ && eos_id_ >= 0 && eos_id_ < row.vocab)
    row.values[eos_id_] = -std::numeric_limits<float>::infinity();
}

namespace {

void add_masks(LogitsProcessorChain& chain, const StepModel& model, const SearchOptions& options) {
  const int32_t eos_id = model.eos_id();
  std::vector<int32_t> suppressed = suppressed_without_eos(model);
  if (!suppressed.empty()) chain.add(std::make_unique<SuppressIds>(std::move(suppressed)));
  if (options.min_length > 0) chain.add(std::make_unique<SuppressEosBeforeMinLength>(eos_id, options.min_length));
  if (options.force_eos_at_max_length) chain.add(std::make_unique<ForceEosAtMaxLength>(eos_id));
}

}  // namespace

LogitsProcessorChain make_mask_chain(const StepModel& model, const SearchOptions& options) {
  LogitsProcessorChain chain;
  add_masks(chain, model, options);
  return chain;
}

LogitsProcessorChain make_log_prob_chain(const StepModel& model, const SearchOptions& options) {
  LogitsProcessorChain chain;
  chain.add(std::make_unique<LogSoftmax>());
  add_masks(chain, model, options);
  return chain;
}

LogitsProcessorChain make_sampling_chain(const SearchOptions& options) {
  LogitsProcessorChain chain;
  if (options.temperature != 1.0f) chain.add(std::make_unique<Temperature>(options.temperature));
  if (options.sampling_topk != 0) chain.add(std::make_unique<TopKFilter>(options.sampling_topk));
  if (options.sampling_topp < 1.0f) chain.add(std::make_unique<TopPFilter>(options.sampling_topp));
  return chain;
}

}  // namespace seqtrans
