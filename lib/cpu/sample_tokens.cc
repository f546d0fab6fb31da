// The sampling output layer on the CPU: the reference for the CUDA kernel, written as the plain sequence
// of Hugging Face's warpers, with the integer weights of core/sampling_math.h so that both backends draw
// the same token.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/sampling_math.h"
#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {
namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

// Where top-p cuts a row ranked by (score descending, id ascending): the last kept token.
struct RankCutoff {
  float score = kMinusInfinity;
  int64_t id = std::numeric_limits<int64_t>::max();

  bool keeps(float x, int64_t i) const { return x > score || (x == score && i <= id); }
};

// One row's draw, step by step in Hugging Face's order.
class RowSampler {
 public:
  RowSampler(const float* bias, int64_t vocab) : bias_(bias), vocab_(vocab) {}

  // The row the next calls read: [vocab] logits.
  void set_row(const float* logits) { logits_ = logits; }

  // z = logit + bias; NaN counts as -inf.
  float logit(int64_t i) const {
    const float z = bias_ ? add_rn(logits_[i], bias_[i]) : logits_[i];
    return std::isnan(z) ? kMinusInfinity : z;
  }

  // log_softmax(z)[id] over the whole row, masked ids included (normalize first, as HF does); rounded as
  // log_softmax_topk rounds, so that a draw that can only take the best token scores as greedy search.
  float log_prob(int64_t id) const {
    float max = kMinusInfinity;
    for (int64_t i = 0; i < vocab_; ++i) max = std::max(max, logit(i));
    double sum = 0.0;
    for (int64_t i = 0; i < vocab_; ++i) sum += std::exp(static_cast<double>(logit(i) - max));
    return (logit(id) - max) - static_cast<float>(std::log(sum));
  }

  // Returns the drawn id, -1 when every score is -inf.
  int32_t draw(const ops::SamplingRow& row, const std::vector<char>& suppressed) {
    scores_.resize(static_cast<size_t>(vocab_));
    float max = kMinusInfinity;
    for (int64_t i = 0; i < vocab_; ++i) {
      const bool masked = suppressed[i] || i == row.banned_id;
      const float z = logit(i);
      scores_[i] = masked ? kMinusInfinity : (row.temperature == 1.0f ? z : divide_rn(z, row.temperature));
      max = std::max(max, scores_[i]);
    }
    if (max == kMinusInfinity) return -1;
    weights_.resize(static_cast<size_t>(vocab_));
    for (int64_t i = 0; i < vocab_; ++i) weights_[i] = sampling_weight(add_rn(scores_[i], -max));

    const float top_k_score = top_k_threshold(row.top_k);
    const RankCutoff cutoff = row.top_p < 1.0f ? top_p_cutoff(top_k_score, row.top_p) : RankCutoff{};
    const uint64_t min_weight = row.min_p > 0.0f ? min_p_weight(row.min_p) : 0;
    // The weights that survive every filter, summed and then walked in id order.
    const auto kept_weight = [&](int64_t i) -> uint64_t {
      const bool kept = scores_[i] >= top_k_score && cutoff.keeps(scores_[i], i) && weights_[i] >= min_weight;
      return kept ? weights_[i] : 0;
    };
    uint64_t total = 0;
    for (int64_t i = 0; i < vocab_; ++i) total += kept_weight(i);
    const uint64_t bits = sampling_bits(uint64_t{row.seed_high} << 32 | row.seed_low,
                                        uint64_t{row.line_high} << 32 | row.line_low, row.step, row.sample);
    const uint64_t position = draw_position(bits, total);
    uint64_t cumulative = 0;
    for (int64_t i = 0; i < vocab_; ++i) {
      cumulative += kept_weight(i);
      if (cumulative > position) return static_cast<int32_t>(i);
    }
    return -1;  // unreachable: the best token always survives, so total > position
  }

 private:
  // HF TopKLogitsWarper: scores below the k-th largest go (ties with it stay).
  float top_k_threshold(int32_t top_k) {
    if (top_k <= 0 || top_k >= vocab_) return kMinusInfinity;
    sorted_.assign(scores_.begin(), scores_.end());
    std::nth_element(sorted_.begin(), sorted_.begin() + (top_k - 1), sorted_.end(), std::greater<float>());
    return sorted_[top_k - 1];
  }

  // HF TopPLogitsWarper over the tokens top-k kept: ranked best first (lower ids first among equal
  // scores), a token stays while the weight ranked before it is below top_p_kept_mass.
  RankCutoff top_p_cutoff(float top_k_score, float top_p) {
    ranked_.clear();
    uint64_t total = 0;
    for (int64_t i = 0; i < vocab_; ++i) {
      if (scores_[i] < top_k_score || weights_[i] == 0) continue;
      ranked_.push_back(i);
      total += weights_[i];
    }
    std::sort(ranked_.begin(), ranked_.end(), [this](int64_t a, int64_t b) {
      return scores_[a] > scores_[b] || (scores_[a] == scores_[b] && a < b);
    });
    const uint64_t kept_mass = top_p_kept_mass(total, top_p);
    uint64_t before = 0;
    for (int64_t i : ranked_) {
      before += weights_[i];
      if (before >= kept_mass) return RankCutoff{scores_[i], i};
    }
    return RankCutoff{};
  }

  const float* logits_ = nullptr;  // [vocab]
  const float* bias_;    // [vocab] or null
  int64_t vocab_;
  std::vector<float> scores_;     // [vocab] masked (logits + bias) / temperature
  std::vector<uint64_t> weights_; // [vocab] exp(score - max) in fixed point
  std::vector<float> sorted_;
  std::vector<int64_t> ranked_;
};

}  // namespace

void sample_tokens(const Tensor& logits, const Tensor& rows, const ops::SampleOptions& options, Tensor& ids,
                   Tensor& log_probs) {
  const int64_t count = logits.dim(0), vocab = logits.dim(1);
  std::vector<char> suppressed(static_cast<size_t>(vocab), 0);
  if (options.suppressed_ids)
    for (int32_t id : options.suppressed_ids->to_int_vector()) suppressed[id] = 1;
  RowSampler sampler(options.bias ? options.bias->data<float>() : nullptr, vocab);
  for (int64_t r = 0; r < count; ++r) {
    ops::SamplingRow settings;
    std::memcpy(static_cast<void*>(&settings), rows.data<int32_t>() + r * ops::kSamplingRowWords, sizeof(settings));
    sampler.set_row(logits.data<float>() + r * vocab);
    const int32_t id = sampler.draw(settings, suppressed);
    ids.data<int32_t>()[r] = id;
    log_probs.data<float>()[r] = id < 0 ? kMinusInfinity : sampler.log_prob(id);
  }
}

}  // namespace seqtrans::cpu
