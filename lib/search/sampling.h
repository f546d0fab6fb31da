// Random sampling (HF `_sample` with do_sample=True): temperature, top-k and top-p filters over the
// masked logits, then one draw per step from the sentence's own seeded generator.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "search/greedy.h"
#include "search/logits_processors.h"

namespace seqtrans {

// Uniform double in [0, 1) from the top 53 bits of one draw; unlike std::uniform_real_distribution its
// output is fixed by this code, not by the standard library.
double uniform_unit(std::mt19937_64& generator);

// Draws an id with probability softmax(row); -inf ids are never drawn, -1 when no score is finite.
int32_t sample_id(ScoreRow logits, std::mt19937_64& generator);

// The generator of sentence `sentence_id` (the input line): streams differ per sentence and depend on
// nothing else, so a line draws the same tokens whatever its batch or batching mode.
std::mt19937_64 sentence_generator(uint64_t seed, uint64_t sentence_id);

// One sampled path. Its score is the sum of the processed log-probs of the sampled tokens (log_softmax
// of the raw logits and the masks, before temperature, top-k and top-p).
class SamplingSentence : public OnePathSentence {
 public:
  SamplingSentence(const StepModel& model, const SearchOptions& options, int max_generated, uint64_t sentence_id);

 protected:
  PathChoice choose(const SlotOutputs& outputs, const RowPosition& position) override;

 private:
  LogitsProcessorChain mask_chain_;
  LogitsProcessorChain log_prob_chain_;
  LogitsProcessorChain sampling_chain_;
  std::mt19937_64 generator_;
  std::vector<float> masked_scratch_, log_prob_scratch_;  // [vocab]
};

}  // namespace seqtrans
