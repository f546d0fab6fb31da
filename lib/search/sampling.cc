#include "search/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "search/greedy.h"
#include "search/search.h"

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

std::mt19937_64 sentence_generator(uint64_t seed, size_t sentence) {
  // std::seed_seq's mixing is fixed by the standard, so streams are the same on every platform.
  std::seed_seq sequence{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                         static_cast<uint32_t>(sentence), static_cast<uint32_t>(static_cast<uint64_t>(sentence) >> 32)};
  return std::mt19937_64(sequence);
}

std::vector<SearchResult> sampling_search(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                          const SearchOptions& options) {
  validate_options(options);
  SEQTRANS_CHECK(options.beam_size == 1, "sampling needs beam_size 1, got {}", options.beam_size);
  SEQTRANS_CHECK(options.num_hypotheses == 1, "sampling returns 1 hypothesis, got num_hypotheses {}",
                 options.num_hypotheses);
  const LogitsProcessorChain sampling_chain = make_sampling_chain(options);
  std::vector<std::mt19937_64> generators;
  generators.reserve(sources.size());
  for (size_t sentence = 0; sentence < sources.size(); ++sentence) {
    generators.push_back(sentence_generator(options.seed, sentence));
  }
  return one_path_search(model, sources, options,
                         logits_chooser(model, options, [&](size_t sentence, ScoreRow masked_logits, const RowPosition& position) {
                           sampling_chain.apply(masked_logits, position);
                           return sample_id(masked_logits, generators[sentence]);
                         }));
}

}  // namespace seqtrans
