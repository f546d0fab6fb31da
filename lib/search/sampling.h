// Random sampling (HF `_sample` with do_sample=True): temperature, top-k and top-p filters over the
// masked logits, then one draw per step from our own seeded generator.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "search/logits_processors.h"
#include "search/options.h"
#include "search/result.h"
#include "search/step_model.h"

namespace seqtrans {

// Uniform double in [0, 1) from the top 53 bits of one draw; unlike std::uniform_real_distribution its
// output is fixed by this code, not by the standard library.
double uniform_unit(std::mt19937_64& generator);

// Draws an id with probability softmax(row); -inf ids are never drawn, -1 when no score is finite.
int32_t sample_id(ScoreRow logits, std::mt19937_64& generator);

// The generator of sentence `sentence` of a batch: streams differ per sentence so that one sentence's
// draws do not depend on when the others finish.
std::mt19937_64 sentence_generator(uint64_t seed, size_t sentence);

// One sampled hypothesis per sentence; deterministic for a given options.seed and batch. Its score is
// the sum of the processed log-probs of the sampled tokens (log_softmax of the raw logits and the masks,
// before temperature, top-k and top-p).
std::vector<SearchResult> sampling_search(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                          const SearchOptions& options);

}  // namespace seqtrans
