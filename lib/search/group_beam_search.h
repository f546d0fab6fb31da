// Diverse beam search (Vijayakumar et al., 2018) with Hugging Face transformers 4.x group beam search
// semantics (see group_beam_search.cc), one sentence at a time.
#pragma once

#include <memory>

#include "search/options.h"
#include "search/sentence_search.h"

namespace seqtrans {

// Candidates per slot that a group beam step needs: its group's 2 * group size best after the Hamming
// penalty are among each row's group size * (groups + 1) best before it, since the earlier groups penalize
// at most group size * (groups - 1) ids.
int group_beam_candidates(const SearchOptions& options);

// A sentence's group beam search within `limits`.
std::unique_ptr<SentenceSearch> make_group_beam_sentence(const StepModel& model, const SearchOptions& options,
                                                         const SentenceLimits& limits);

}  // namespace seqtrans
