#include "search/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "search/search_common.h"

namespace seqtrans {

double uniform_unit(std::mt19937_64& generator) {
  return static_cast<double>(generator() >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

int32_t sample_id(ScoreRow logits, std::mt19937_64& generator) {
  float max_value = -std::numeric_limits<float>::infinity();
  for (int64_t id = 0; id < logits.vocab; ++id) max_value = std::max(max_value, logits.values[id]);
  if (!std::isfinite(max_value)) return -1;

  std::vector<double> cumulative(static_cast<size_t>(logits.vocab));  // [vocab]
  double total = 0.0;
  for (int64_t id = 0; id < logits.vocab; ++id) {
    const float value = logits.values[id];
    // NaN compares false and so gets no weight, like -inf.
    if (value > -std::numeric_limits<float>::infinity()) total += std::exp(static_cast<double>(value - max_value));
    cumulative[id] = total;
  }
  const double target = uniform_unit(generator) * total;
  const auto chosen = std::upper_bound(cumulative.begin(), cumulative.end(), target);
  if (chosen != cumulative.end()) return static_cast<int32_t>(chosen - cumulative.begin());
  // Rounding can leave target == total: take the last id with weight.
  for (int64_t id = logits.vocab - 1; id >= 0; --id) {
    if (logits.values[id] > -std::numeric_limits<float>::infinity()) return static_cast<int32_t>(id);
  }
  return -1;
}

std::mt19937_64 sentence_generator(uint64_t seed, uint64_t sentence_id) {
  // std::seed_seq's mixing is fixed by the standard, so streams are the same on every platform.
  std::seed_seq sequence{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                         static_cast<uint32_t>(sentence_id), static_cast<uint32_t>(sentence_id >> 32)};
  return std::mt19937_64(sequence);
}

SamplingSentence::SamplingSentence(const StepModel& model, const SearchOptions& options, int max_generated,
                                   uint64_t sentence_id)
    : OnePathSentence(model, options, max_generated),
      mask_chain_(make_mask_chain(model, options)),
      log_prob_chain_(make_log_prob_chain(model, options)),
      sampling_chain_(make_sampling_chain(options)),
      generator_(sentence_generator(options.seed, sentence_id)) {}

PathChoice SamplingSentence::choose(const SlotOutputs& outputs, const RowPosition& position) {
  const Tensor& logits = *outputs.logits;
  const ScoreRow masked = processed_row(logits, outputs.first_slot, mask_chain_, position, masked_scratch_);
  sampling_chain_.apply(masked, position);
  const int32_t token = sample_id(masked, generator_);
  if (token < 0) return {};
  const ScoreRow log_probs = processed_row(logits, outputs.first_slot, log_prob_chain_, position, log_prob_scratch_);
  return {token, log_probs.values[token]};
}

}  // namespace seqtrans
