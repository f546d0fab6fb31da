// Beam search with Hugging Face transformers `generate()` semantics (num_beams > 1, do_sample=False).
#pragma once

#include <cstdint>
#include <vector>

#include "search/options.h"
#include "search/result.h"
#include "search/step_model.h"

namespace seqtrans {

// Runs beam search for every sentence; each result holds options.num_hypotheses hypotheses, best first,
// scored by sum of log-probs / generated_length ^ length_penalty. Sentences leave the batch as soon as
// their beam is done.
std::vector<SearchResult> beam_search(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                      const SearchOptions& options);

}  // namespace seqtrans
